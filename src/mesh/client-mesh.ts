import type { Dial } from '../proxy/dial.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { SidecarIdentity } from './sidecar-identity.ts';

/**
 * A mesh client that listens on no mesh port (the gateway with --mtls on). Its identity may not be
 * startable at first: the trust bundle arrives only once the issuer has filled the ConfigMap, after
 * the pod started. Until it starts, every dial fails (a configured mesh client never falls back to
 * plaintext on its own) and ready() is false; start is retried every retryMs.
 */
export class ClientMesh {
  readonly #start: () => Promise<SidecarIdentity>;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #retryMs: number;
  #identity: SidecarIdentity | undefined;
  #problem: string | undefined;
  #timer: Timer | undefined;
  #closed = false;

  constructor(o: { start: () => Promise<SidecarIdentity>; clock: Clock; log: Logger; retryMs?: number }) {
    this.#start = o.start;
    this.#clock = o.clock;
    this.#log = o.log;
    this.#retryMs = o.retryMs ?? 5_000;
    void this.#attempt();
  }

  readonly dial: Dial = (host, port, cb, namespace, meshed) => {
    if (this.#identity) return this.#identity.wiring.dial(host, port, cb, namespace, meshed);
    cb(new Error(`no mesh identity yet: ${this.#problem ?? 'starting'}`));
  };

  /** Holds a certificate (the mesh client is unready until then). */
  ready(): boolean {
    return this.#identity?.wiring.ready() ?? false;
  }

  view(): unknown {
    const id = this.#identity;
    return id
      ? { ...(id.view() as object), dial: id.wiring.stats() }
      : { started: false, problem: this.#problem };
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#identity?.close();
  }

  async #attempt(): Promise<void> {
    try {
      const identity = await this.#start();
      if (this.#closed) return identity.close();
      this.#identity = identity;
      if (this.#problem) this.#log.info('mesh identity started');
    } catch (e) {
      if (this.#closed) return;
      // Logged once per distinct problem: a missing bundle file is retried quietly.
      if (this.#problem !== errorMessage(e))
        this.#log.warn('mesh identity not started; retrying', { error: errorMessage(e) });
      this.#problem = errorMessage(e);
      this.#timer = this.#clock.setTimer(this.#retryMs, () => void this.#attempt());
    }
  }
}
