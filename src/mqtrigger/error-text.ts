// Broker client errors often wrap the reason: "createTopics failed 6 times"
// says nothing of a refused password. Logs get the causes too, and TLS
// failures, which OpenSSL words for people who know OpenSSL, what to change.

const SERVER_CA = "the server's certificate is not from a CA the trigger trusts: put that CA in the trigger secret's ca";
const TLS_HINTS: Record<string, string> = {
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: "the server wants a client certificate: put it in the trigger secret's cert and key",
  'ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE': "the server refused the client certificate, or wants one: put one it trusts in the trigger secret's cert and key",
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: "the server does not trust the CA of the client certificate in the trigger secret's cert",
  SELF_SIGNED_CERT_IN_CHAIN: SERVER_CA,
  DEPTH_ZERO_SELF_SIGNED_CERT: SERVER_CA,
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: SERVER_CA,
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: SERVER_CA,
  ERR_TLS_CERT_ALTNAME_INVALID: "the server's certificate does not name the host the trigger connects to",
};

/** An error's message followed by the distinct messages of what caused it (`errors`, `cause`), at most `max` in all. */
export function errorText(err: unknown, max = 4): string {
  const parts: string[] = [];
  const walk = (e: unknown, depth: number): void => {
    if (e === null || e === undefined || depth > 4 || parts.length >= max) return;
    const message = (e instanceof Error ? e.message : String(e)).trim().replace(/\.$/, '');
    if (message !== '' && !parts.includes(message)) parts.push(message);
    const hint = TLS_HINTS[String((e as { code?: unknown }).code)];
    if (hint !== undefined && !parts.includes(hint)) parts.push(hint);
    const nested = (e as { errors?: unknown }).errors;
    if (Array.isArray(nested)) for (const n of nested) walk(n, depth + 1);
    walk((e as { cause?: unknown }).cause, depth + 1);
  };
  walk(err, 0);
  return parts.join(': ');
}
