// A build's output (DEPLOY_PKG) into the archive store: a directory is
// zipped; a single file is zipped too, unless the environment keeps archives
// as they are (`keeparchive`) or the file already is a zip. The output is
// the build's, so user content: DEPLOY_PKG itself is looked at with lstat, a
// file is read without following a link, and a directory's links are held
// to the archive rule (zipDirectory: they must resolve inside the tree).

import fs from 'node:fs';
import path from 'node:path';
import { FlintError } from '../api/errors.ts';
import { type ArchiveInfo, type ArchiveStore, isZipFile, zipDirectory, zipFiles } from '../archive/index.ts';
import { readStreamNoFollow } from '../fsafe/open.ts';

export async function storeBuildOutput(archives: ArchiveStore, deployPath: string, workDir: string, keepArchive: boolean): Promise<ArchiveInfo> {
  const st = fs.lstatSync(deployPath);
  if (st.isFile() && (keepArchive || (await isZipFile(deployPath)))) return archives.put(readStreamNoFollow(deployPath));
  const zip = path.join(workDir, 'deploy.zip');
  if (st.isDirectory()) await zipDirectory(deployPath, zip);
  else if (st.isFile()) await zipFiles([{ path: deployPath, name: path.basename(deployPath) }], zip);
  else throw new FlintError('FLINT_ERR_VALIDATION', 'the build left something at DEPLOY_PKG that is neither a file nor a directory');
  return archives.put(readStreamNoFollow(zip));
}
