import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * The per-request counter, latency histogram and gRPC call counter, kept out of prom-client: its
 * inc() and observe() hash the label object on every call, and these run once per request; and
 * its registry formats every sample's labels again at every scrape, which for a sidecar talking
 * to 1,000 Services held the event loop for tens of milliseconds. Each label set gets one plain
 * record, found through nested maps without building a key string, with its label text escaped
 * once; a scrape renders the records in the Prometheus text format, byte for byte as prom-client
 * would, and yields to the event loop between batches of series so that requests are not held
 * behind it.
 */
interface Series {
  /** `direction="egress",service="ns/web",...`, escaped. */
  labels: string;
  count: number;
}

interface HistogramSeries extends Series {
  sum: number;
  /** Observations per bucket (not cumulative), the last one for +Inf. */
  buckets: number[];
}

type Slot<S> = Map<string | number, S>;

/** Series rendered between two turns of the event loop. */
const BATCH = 100;

/**
 * Series indexed by direction, then Service, then caller, then a last key (status, or status and
 * error code): nested maps, so that finding one builds no key string.
 */
class SeriesIndex<S> {
  readonly #root = new Map<string, Map<string, Map<string, Slot<S>>>>();
  readonly all: S[] = [];

  /** The series of one direction, Service and caller, by their last key. */
  slot(direction: string, service: string, caller: string): Slot<S> {
    return level(level(level(this.#root, direction), service), caller);
  }

  add(slot: Slot<S>, key: string | number, s: S): S {
    slot.set(key, s);
    this.all.push(s);
    return s;
  }

  reset(): void {
    this.#root.clear();
    this.all.length = 0;
  }
}

function level<K, V>(parent: Map<string, Map<K, V>>, key: string): Map<K, V> {
  let child = parent.get(key);
  if (!child) parent.set(key, (child = new Map<K, V>()));
  return child;
}

/** A metric rendered by its owner at scrape time: HELP, TYPE and its samples. */
abstract class Rendered<S> {
  readonly name: string;
  readonly #header: string;
  protected readonly index = new SeriesIndex<S>();

  constructor(name: string, help: string, type: 'counter' | 'histogram') {
    this.name = name;
    this.#header = `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}`;
  }

  /** The metric's block of the exposition, without a final newline. */
  async render(): Promise<string> {
    const lines = [this.#header];
    const all = this.index.all;
    for (let i = 0; i < all.length; i += BATCH) {
      if (i > 0) await nextTurn();
      for (const s of all.slice(i, i + BATCH)) this.lines(s, lines);
    }
    return lines.join('\n');
  }

  reset(): void {
    this.index.reset();
  }

  protected abstract lines(s: S, out: string[]): void;
}

/** The label text of a series, escaped as the Prometheus text format wants. */
function labelText(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`)
    .join(',');
}

function escapeHelp(help: string): string {
  return help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** A counter: one plain series per label set, rendered as `name{labels} count`. */
abstract class SeriesCounter extends Rendered<Series> {
  constructor(name: string, help: string) {
    super(name, help, 'counter');
  }

  protected lines(s: Series, out: string[]): void {
    out.push(`${this.name}{${s.labels}} ${s.count}`);
  }
}

/** outrigger_requests_total: by direction, Service, caller, status and proxy error code. */
export class RequestCounter extends SeriesCounter {
  inc(direction: string, service: string, caller: string, status: number, error: string): void {
    const key = error === '' ? status : `${status} ${error}`;
    const slot = this.index.slot(direction, service, caller);
    const s =
      slot.get(key) ??
      this.index.add(slot, key, {
        labels: labelText({ direction, service, caller, status: String(status), error }),
        count: 0,
      });
    s.count++;
  }
}

/** outrigger_grpc_calls_total: by direction, Service and gRPC status. */
export class GrpcCallCounter extends SeriesCounter {
  inc(direction: string, service: string, grpcStatus: number): void {
    const slot = this.index.slot(direction, service, '');
    const s =
      slot.get(grpcStatus) ??
      this.index.add(slot, grpcStatus, {
        labels: labelText({ direction, service, grpc_status: String(grpcStatus) }),
        count: 0,
      });
    s.count++;
  }
}

/** outrigger_request_duration_seconds: by direction, Service and caller. */
export class LatencyHistogram extends Rendered<HistogramSeries> {
  readonly #bounds: readonly number[];

  constructor(name: string, help: string, bounds: readonly number[]) {
    super(name, help, 'histogram');
    this.#bounds = bounds;
  }

  observe(direction: string, service: string, caller: string, seconds: number): void {
    const slot = this.index.slot(direction, service, caller);
    const s =
      slot.get('') ??
      this.index.add(slot, '', {
        labels: labelText({ direction, service, caller }),
        count: 0,
        sum: 0,
        buckets: new Array<number>(this.#bounds.length + 1).fill(0),
      });
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    s.buckets[i]!++;
    s.count++;
    s.sum += seconds;
  }

  protected lines(s: HistogramSeries, out: string[]): void {
    // As prom-client renders its histograms: `le` first, then the series' labels.
    const name = this.name;
    let acc = 0;
    this.#bounds.forEach((bound, i) => {
      acc += s.buckets[i]!;
      out.push(`${name}_bucket{le="${bound}",${s.labels}} ${acc}`);
    });
    out.push(`${name}_bucket{le="+Inf",${s.labels}} ${s.count}`);
    out.push(`${name}_sum{${s.labels}} ${s.sum}`);
    out.push(`${name}_count{${s.labels}} ${s.count}`);
  }
}
