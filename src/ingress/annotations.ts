// The few ingress annotations the local providers act on. They use the
// ingress-nginx names, so a route behaves the same under the builtin gateway,
// the local nginx and ingress-nginx in a cluster. Every other annotation is
// passed to Kubernetes untouched and ignored locally.

export const ANNOTATION_SSL_REDIRECT = 'nginx.ingress.kubernetes.io/ssl-redirect';
export const ANNOTATION_FORCE_SSL_REDIRECT = 'nginx.ingress.kubernetes.io/force-ssl-redirect';
export const ANNOTATION_PROXY_BODY_SIZE = 'nginx.ingress.kubernetes.io/proxy-body-size';

export interface LocalIngressOptions {
  /** Answer plain-HTTP requests with a 308 to HTTPS. */
  sslRedirect: boolean;
  /** Largest request body in bytes; undefined = no limit. */
  maxBodyBytes?: number;
  /** The body size as nginx writes it (`8m`), when set. */
  nginxBodySize?: string;
  /** Annotations that were recognised but had a bad value. */
  problems: string[];
}

const SIZE_RE = /^([0-9]{1,12})([kKmMgG]?)$/;
const UNIT: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

export function localOptions(annotations: Record<string, string>, hasTls: boolean): LocalIngressOptions {
  const out: LocalIngressOptions = { sslRedirect: false, problems: [] };
  const flag = (key: string): boolean => {
    const v = annotations[key];
    if (v === undefined) return false;
    if (v === 'true') return true;
    if (v !== 'false') out.problems.push(`${key} must be "true" or "false", got '${v}'`);
    return false;
  };
  // ingress-nginx redirects only TLS ingresses unless forced.
  out.sslRedirect = (hasTls && flag(ANNOTATION_SSL_REDIRECT)) || flag(ANNOTATION_FORCE_SSL_REDIRECT);
  const size = annotations[ANNOTATION_PROXY_BODY_SIZE];
  if (size !== undefined) {
    const m = SIZE_RE.exec(size.trim());
    if (!m) out.problems.push(`${ANNOTATION_PROXY_BODY_SIZE} must be a size such as 8m, 512k or 0, got '${size}'`);
    else {
      const bytes = Number(m[1]) * UNIT[m[2].toLowerCase()];
      if (bytes > 0) {
        out.maxBodyBytes = bytes;
        out.nginxBodySize = `${m[1]}${m[2].toLowerCase()}`;
      } else out.nginxBodySize = '0';
    }
  }
  return out;
}
