import {
  parseValue,
  trustDomain as trustDomainParser,
  validNamespace,
  validServiceAccount,
} from '../config/parse.ts';

/**
 * A workload's identity: spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>, the one URI
 * SAN of its certificate (SPIFFE X509-SVID). Istio uses the same shape, so policies and tools that
 * read Istio identities read ours.
 */
export interface SpiffeId {
  trustDomain: string;
  namespace: string;
  serviceAccount: string;
}

const TRUST_DOMAIN = /^[a-z0-9._-]{1,255}$/;

export function formatSpiffeId(id: SpiffeId): string {
  return `spiffe://${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;
}

export function validTrustDomain(td: string): boolean {
  return TRUST_DOMAIN.test(td);
}

/** Checks a trust domain from a flag; the message names the key and what is allowed. */
export const checkTrustDomain = (key: string, td: string): string =>
  parseValue(trustDomainParser, key, td, 'flag');

/** Parses an Outrigger workload id; undefined for anything else (other SPIFFE paths, other schemes). */
export function parseSpiffeId(uri: string): SpiffeId | undefined {
  const m = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/sa\/([^/]+)$/.exec(uri);
  if (!m || uri.length > 2048) return undefined;
  const [, trustDomain = '', namespace = '', serviceAccount = ''] = m;
  if (!validTrustDomain(trustDomain) || !validNamespace(namespace) || !validServiceAccount(serviceAccount))
    return undefined;
  return { trustDomain, namespace, serviceAccount };
}

/** The identity a TokenReview vouches for: username system:serviceaccount:<ns>:<sa>. */
export function idFromServiceAccountUser(trustDomain: string, username: string): SpiffeId | undefined {
  const m = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(username);
  if (!m) return undefined;
  const [, namespace = '', serviceAccount = ''] = m;
  if (!validNamespace(namespace) || !validServiceAccount(serviceAccount)) return undefined;
  return { trustDomain, namespace, serviceAccount };
}

export const sameId = (a: SpiffeId, b: SpiffeId): boolean =>
  a.trustDomain === b.trustDomain && a.namespace === b.namespace && a.serviceAccount === b.serviceAccount;
