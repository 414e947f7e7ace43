import { Agent } from 'node:http';
import type { Socket } from 'node:net';
import { LRUCache } from 'lru-cache';

/**
 * One keep-alive agent per upstream endpoint. http-proxy without an agent closes every upstream
 * connection (reference/performance.md section 2.1), which costs an order of magnitude in
 * throughput. Idle upstream sockets are dropped before the common 5 s server keep-alive timeout so
 * a request never lands on a socket the server is closing. Agents of endpoints that stop being
 * used are evicted and destroyed.
 */
export interface AgentPoolOptions {
  /** Idle time after which a pooled upstream socket is closed. */
  freeSocketMs?: number;
  maxAgents?: number;
  /**
   * Opens upstream connections instead of Node's net.connect (mutual TLS to meshed endpoints).
   * Asynchronous: the callback gets a connected socket or the connect error.
   */
  dial?: (host: string, port: number, cb: (err: Error | null, socket?: Socket) => void) => void;
}

export class AgentPool {
  readonly #agents: LRUCache<string, Agent>;
  readonly #freeSocketMs: number;
  readonly #dial: AgentPoolOptions['dial'];

  constructor(o: AgentPoolOptions = {}) {
    this.#freeSocketMs = o.freeSocketMs ?? 4_000;
    this.#dial = o.dial;
    this.#agents = new LRUCache({ max: o.maxAgents ?? 1_000, dispose: (agent) => agent.destroy() });
  }

  for(host: string, port: number): Agent {
    const key = `${host}:${port}`;
    let agent = this.#agents.get(key);
    if (!agent) {
      agent = new Agent({ keepAlive: true, timeout: this.#freeSocketMs, scheduling: 'lifo' });
      const dial = this.#dial;
      if (dial)
        agent.createConnection = (_opts, cb) => void dial(host, port, (err, s) => cb?.(err, s as Socket));
      this.#agents.set(key, agent);
    }
    return agent;
  }

  stats(): { agents: number; sockets: number; free: number } {
    let sockets = 0;
    let free = 0;
    for (const a of this.#agents.values()) {
      for (const list of Object.values(a.sockets)) sockets += list?.length ?? 0;
      for (const list of Object.values(a.freeSockets)) free += list?.length ?? 0;
    }
    return { agents: this.#agents.size, sockets, free };
  }

  destroy(): void {
    this.#agents.clear();
  }
}
