import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { OutriggerError, errorMessage } from '../shared/errors.ts';

const HOW =
  'make a certificate and key with scripts/gen-webhook-certs --out DIR (then --tls-cert DIR/tls.crt --tls-key DIR/tls.key), ' +
  'or mount the webhook TLS Secret at /etc/outrigger/webhook-tls';

/**
 * The webhook's certificate and key, checked before the server starts so a missing or malformed
 * file is reported with the flag that named it and what to do, not as a bare ENOENT or an OpenSSL
 * "no start line".
 */
export function checkWebhookTls(certFile: string, keyFile: string): void {
  const read = (flag: string, file: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch (e) {
      throw new OutriggerError(
        'source_invalid',
        `${flag} ${file}: cannot read it (${errorMessage(e)}); ${HOW}`,
      );
    }
  };
  const cert = read('--tls-cert', certFile);
  const key = read('--tls-key', keyFile);
  try {
    new X509Certificate(cert);
  } catch (e) {
    throw new OutriggerError(
      'config_invalid',
      `--tls-cert ${certFile}: not a PEM certificate (${errorMessage(e)}); ${HOW}`,
    );
  }
  try {
    createPrivateKey(key);
  } catch (e) {
    throw new OutriggerError(
      'config_invalid',
      `--tls-key ${keyFile}: not a PEM private key (${errorMessage(e)}); ${HOW}`,
    );
  }
}
