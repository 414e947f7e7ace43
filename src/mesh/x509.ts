/**
 * X.509 building blocks over @peculiar/x509 (node:crypto parses certificates but cannot build a
 * CSR or sign one). The only module that imports the library, and loaded only by processes that
 * use mesh identity. Keys are ECDSA P-256 (SPIFFE and Linkerd use it; signing is ~15x cheaper
 * than RSA-2048 for the side that signs every handshake).
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPrivateKey, generateKeyPair, randomBytes, webcrypto, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { promisify } from 'node:util';
import { OutriggerError } from '../shared/errors.ts';

x509.cryptoProvider.set(webcrypto as never);

type CryptoKey = webcrypto.CryptoKey;
type SigningAlgorithm = { name: string; hash: string; namedCurve?: string };

const P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface KeyPair {
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export async function generateP256(): Promise<KeyPair> {
  return promisify(generateKeyPair)('ec', { namedCurve: 'P-256' });
}

export const privateKeyPem = (k: KeyObject): string => k.export({ format: 'pem', type: 'pkcs8' }).toString();

/** The WebCrypto algorithm that signs with a key: ECDSA P-256/P-384 or RSA PKCS#1 v1.5. */
function signingAlgorithm(key: KeyObject): SigningAlgorithm {
  if (key.asymmetricKeyType === 'rsa') return { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (key.asymmetricKeyType === 'ec' && (curve === 'prime256v1' || curve === 'P-256')) return { ...P256 };
  if (key.asymmetricKeyType === 'ec' && (curve === 'secp384r1' || curve === 'P-384'))
    return { name: 'ECDSA', namedCurve: 'P-384', hash: 'SHA-384' };
  throw new OutriggerError(
    'config_invalid',
    `unsupported signing key ${key.asymmetricKeyType ?? '?'}${curve ? ` ${curve}` : ''}: allowed are EC P-256, EC P-384 and RSA`,
  );
}

function toSigner(key: KeyObject): { key: CryptoKey; alg: SigningAlgorithm } {
  const alg = signingAlgorithm(key);
  return { key: key.toCryptoKey(alg, false, ['sign']), alg };
}

const webKeys = (keys: KeyPair): { privateKey: CryptoKey; publicKey: CryptoKey } => ({
  privateKey: keys.privateKey.toCryptoKey(P256, false, ['sign']),
  publicKey: keys.publicKey.toCryptoKey(P256, true, ['verify']),
});

/** A CSR for one URI SAN (critical, empty subject, as SPIFFE asks), signed by the workload's key. */
export async function createCsr(keys: KeyPair, uri: string): Promise<string> {
  const { privateKey, publicKey } = webKeys(keys);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    keys: { privateKey, publicKey },
    signingAlgorithm: P256,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: uri }], true)],
  });
  return csr.toString('pem');
}

export interface ParsedCsr {
  /** The requested names: URIs, and how many names of any other kind. */
  uris: string[];
  otherNames: number;
  publicKey: x509.PublicKey;
}

const invalid = (msg: string): OutriggerError => new OutriggerError('identity_request_invalid', msg);

/** Parses a PEM CSR, checks its self-signature and that its key is EC P-256. */
export async function parseCsr(pem: string): Promise<ParsedCsr> {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem);
  } catch {
    throw invalid('csr is not a PEM PKCS#10 certificate request');
  }
  if (!(await csr.verify().catch(() => false))) throw invalid('csr signature does not verify');
  const alg = csr.publicKey.algorithm as { name: string; namedCurve?: string };
  if (alg.name !== 'ECDSA' || alg.namedCurve !== 'P-256')
    throw invalid(`csr key is ${alg.name}${alg.namedCurve ? ` ${alg.namedCurve}` : ''}: allowed is EC P-256`);
  const san = csr.getExtension('2.5.29.17');
  const names = san instanceof x509.SubjectAlternativeNameExtension ? san.names.items : [];
  return {
    uris: names.filter((n) => n.type === 'url').map((n) => n.value),
    otherNames: names.filter((n) => n.type !== 'url').length,
    publicKey: csr.publicKey,
  };
}

export interface Signer {
  /** The signing certificate (PEM). */
  certPem: string;
  key: KeyObject;
}

export interface LeafRequest {
  publicKey: x509.PublicKey | KeyObject;
  uri?: string;
  dns?: readonly string[];
  notBefore: Date;
  notAfter: Date;
}

/**
 * A leaf certificate as SPIFFE X509-SVID wants it: empty subject with critical SANs, cA=false,
 * critical keyUsage digitalSignature, EKU serverAuth + clientAuth (a sidecar is both).
 */
export async function signLeaf(signer: Signer, req: LeafRequest): Promise<string> {
  const issuer = new x509.X509Certificate(signer.certPem);
  const { key, alg } = toSigner(signer.key);
  const publicKey =
    req.publicKey instanceof x509.PublicKey
      ? req.publicKey
      : req.publicKey.toCryptoKey(P256, true, ['verify']);
  const names: x509.JsonGeneralName[] = [
    ...(req.uri ? [{ type: 'url' as const, value: req.uri }] : []),
    // An address among the names (an issuer reached by IP) is an IP SAN: TLS checks IPs against those.
    ...(req.dns ?? []).map((value) => ({ type: isIP(value) ? ('ip' as const) : ('dns' as const), value })),
  ];
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f; // a positive INTEGER
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial.toString('hex'),
    subject: '',
    issuer: issuer.subjectName,
    notBefore: req.notBefore,
    notAfter: req.notAfter,
    publicKey,
    signingKey: key,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([
        x509.ExtendedKeyUsage.serverAuth,
        x509.ExtendedKeyUsage.clientAuth,
      ]),
      new x509.SubjectAlternativeNameExtension(names, true),
      await x509.AuthorityKeyIdentifierExtension.create(issuer, false),
    ],
  });
  return cert.toString('pem');
}

/** A self-signed CA (tests and `outrigger identity --generate-ca`-style tooling). */
export async function selfSignedCa(name: string, notBefore: Date, notAfter: Date): Promise<Signer> {
  const keys = await generateP256();
  const { privateKey, publicKey } = webKeys(keys);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: `CN=${name}`,
    notBefore,
    notAfter,
    keys: { privateKey, publicKey },
    signingAlgorithm: P256,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), key: keys.privateKey };
}

export const loadPrivateKey = (pem: string): KeyObject => createPrivateKey(pem);
