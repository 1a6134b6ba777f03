// The spec directory's fixed names, apart from the reader (documents.ts),
// which needs the YAML parser and the schemas: a create command's --spec
// flags need only these.

export const DEPLOYMENT_CONFIG_FILE = 'flint-deployment-config.yaml';
/** The label that ties a resource to the spec directory that applied it. */
export const DEPLOYMENT_LABEL = 'flint.dev/deployment-uid';
/** Package archives may name an ArchiveUploadSpec: `archive://<name>`. */
export const ARCHIVE_SPEC_SCHEME = 'archive://';
