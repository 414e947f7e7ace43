import {
  X509Certificate,
  createHash,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  type KeyObject,
} from 'node:crypto';
import { isIP } from 'node:net';

/**
 * The webhook's CA and serving certificate and the mesh's root and issuing CA, made in-process so `outrigger install` needs no
 * openssl. Node can parse X.509 but not issue it, so this writes the DER itself (RFC 5280):
 * ECDSA P-256 keys, SHA-256 signatures, and only the extensions these certificates need.
 * X509Certificate re-parses every result, so a malformed encoding fails here, not in the cluster.
 */
export interface Issued {
  certPem: string;
  keyPem: string;
  cert: X509Certificate;
  key: KeyObject;
}

export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

// ---- DER ----
const lengthBytes = (n: number): Buffer => {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
};
const tlv = (tag: number, ...body: Buffer[]): Buffer => {
  const content = Buffer.concat(body);
  return Buffer.concat([Buffer.from([tag]), lengthBytes(content.length), content]);
};
const seq = (...parts: Buffer[]): Buffer => tlv(0x30, ...parts);
const positiveInt = (raw: Buffer): Buffer => {
  let b = raw;
  while (b.length > 1 && b[0] === 0) b = b.subarray(1);
  return tlv(0x02, (b[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
};
const oid = (dotted: string): Buffer => {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a + b];
  for (const n of rest) {
    const chunk = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
};
const time = (d: Date): Buffer => {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  // RFC 5280: UTCTime through 2049, GeneralizedTime from 2050.
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2))) : tlv(0x18, Buffer.from(iso));
};
const bits = (unused: number, ...bytes: number[]): Buffer => tlv(0x03, Buffer.from([unused, ...bytes]));
const name = (cn: string): Buffer => seq(tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn)))));
const extension = (id: string, critical: boolean, value: Buffer): Buffer =>
  seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));

const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  const [head = '', tail = ''] = ip.split('::');
  const groups = (s: string): string[] => (s ? s.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const all = ip.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return Buffer.from(all.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

/**
 * RFC 5280's key identifier (method 1): SHA-1 of the subjectPublicKey bits, for P-256 the last
 * 65 bytes of the SPKI (the uncompressed point). openssl -x509_strict, like RFC 5280, wants a
 * CA's subjectKeyIdentifier and an authorityKeyIdentifier on what a CA signs.
 */
const keyId = (key: KeyObject): Buffer =>
  createHash('sha1')
    .update(
      (key.type === 'public' ? key : createPublicKey(key))
        .export({ type: 'spki', format: 'der' })
        .subarray(-65),
    )
    .digest();

const keyIds = (subject: KeyObject, signer: KeyObject): Buffer[] => [
  extension('2.5.29.14', false, tlv(0x04, keyId(subject))),
  extension('2.5.29.35', false, seq(tlv(0x80, keyId(signer)))),
];

function certificate(o: {
  subject: string;
  issuer: string;
  publicKey: KeyObject;
  signer: KeyObject;
  validity: Validity;
  extensions: Buffer[];
}): X509Certificate {
  const tbs = seq(
    tlv(0xa0, positiveInt(Buffer.from([2]))),
    positiveInt(randomBytes(16)),
    ECDSA_SHA256,
    name(o.issuer),
    seq(time(o.validity.notBefore), time(o.validity.notAfter)),
    name(o.subject),
    o.publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...o.extensions, ...keyIds(o.publicKey, o.signer))),
  );
  const signature = sign('sha256', tbs, o.signer);
  const der = seq(tbs, ECDSA_SHA256, bits(0, ...signature));
  return new X509Certificate(der);
}

const pem = (der: Buffer): string =>
  `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;

function issued(cert: X509Certificate, key: KeyObject): Issued {
  return {
    cert,
    key,
    certPem: pem(cert.raw),
    keyPem: key.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

const newKey = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' });

/**
 * basicConstraints cA=TRUE (with pathLenConstraint when given) and keyCertSign and cRLSign
 * (bits 5 and 6): a CA that signs certificates and nothing else.
 */
const caExtensions = (pathLen?: number): Buffer[] => [
  extension(
    '2.5.29.19',
    true,
    seq(
      tlv(0x01, Buffer.from([0xff])),
      ...(pathLen === undefined ? [] : [positiveInt(Buffer.from([pathLen]))]),
    ),
  ),
  extension('2.5.29.15', true, bits(1, 0x06)),
];

export function makeCa(commonName: string, validity: Validity): Issued {
  const { publicKey, privateKey } = newKey();
  const cert = certificate({
    subject: commonName,
    issuer: commonName,
    publicKey,
    signer: privateKey,
    validity,
    extensions: caExtensions(),
  });
  return issued(cert, privateKey);
}

/**
 * An issuing CA signed by root with pathLenConstraint 0: it signs workload certificates only,
 * never another CA, so its key (the one kept online, in the cluster) cannot mint a sub-CA.
 */
export function issueIntermediate(root: Issued, commonName: string, validity: Validity): Issued {
  const { publicKey, privateKey } = newKey();
  const cert = certificate({
    subject: commonName,
    issuer: cnOf(root),
    publicKey,
    signer: root.key,
    validity,
    extensions: caExtensions(0),
  });
  return issued(cert, privateKey);
}

const cnOf = (ca: Issued): string => ca.cert.subject.replace(/^CN=/, '');

/** A serving certificate for the given DNS names and IP addresses, signed by ca. */
export function issueServing(ca: Issued, sans: string[], validity: Validity): Issued {
  const { publicKey, privateKey } = newKey();
  const altNames = sans.map((s) => (isIP(s) ? tlv(0x87, ipBytes(s)) : tlv(0x82, Buffer.from(s))));
  const cert = certificate({
    subject: sans[0] ?? 'outrigger-webhook',
    issuer: cnOf(ca),
    publicKey,
    signer: ca.key,
    validity,
    extensions: [
      extension('2.5.29.19', true, seq()),
      // digitalSignature and keyEncipherment (bits 0 and 2).
      extension('2.5.29.15', true, bits(5, 0xa0)),
      extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))),
      extension('2.5.29.17', false, seq(...altNames)),
    ],
  });
  return issued(cert, privateKey);
}
