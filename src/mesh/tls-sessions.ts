/**
 * The client side of TLS 1.3 resumption: the last session ticket per mesh endpoint and app port
 * (the SNI; OpenSSL resumes only under the same name), offered on the next connection so it skips
 * the certificate exchange and its signatures. Bounded; forgotten when the sidecar's certificate
 * or trust bundle changes, so a server never sees an old certificate through a resumed session.
 */
export class TlsSessions {
  readonly #byKey = new Map<string, Buffer>();
  readonly #max: number;

  constructor(max = 10_000) {
    this.#max = max;
  }

  get(key: string): Buffer | undefined {
    return this.#byKey.get(key);
  }

  set(key: string, ticket: Buffer): void {
    this.#byKey.delete(key);
    // Map order is insertion order: the first key is the least recently stored.
    if (this.#byKey.size >= this.#max) this.#byKey.delete(this.#byKey.keys().next().value as string);
    this.#byKey.set(key, ticket);
  }

  delete(key: string): void {
    this.#byKey.delete(key);
  }

  clear(): void {
    this.#byKey.clear();
  }

  get size(): number {
    return this.#byKey.size;
  }
}
