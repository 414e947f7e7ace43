import type { Metric, Registry } from 'prom-client';

/**
 * The per-request counter and latency histogram, kept out of prom-client's per-call path: its
 * inc() and observe() hash the label object on every call, and these run once per request. Each
 * label set gets one plain record, found through nested maps without building a key string;
 * prom-client's registry renders them at scrape time like its own metrics.
 */
type Labels = Record<string, string>;

/** A sample as prom-client's registry reads it when it renders a metric. */
interface Value {
  labels: Record<string, string | number>;
  sharedLabels?: Labels;
  value: number;
  metricName?: string;
}

interface Series {
  labels: Labels;
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative), the last one for +Inf. */
  buckets: number[];
}

/**
 * Series indexed by direction, then Service, then caller, then a last key (status, or status and
 * error code): nested maps, so that finding one builds no key string.
 */
class SeriesIndex {
  readonly #root = new Map<string, Map<string, Map<string, Map<string | number, Series>>>>();
  readonly all: Series[] = [];

  get(direction: string, service: string, caller: string, key: string | number, make: () => Series): Series {
    const byKey = level(level(level(this.#root, direction), service), caller);
    let s = byKey.get(key);
    if (!s) {
      s = make();
      byKey.set(key, s);
      this.all.push(s);
    }
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

/** A metric prom-client's registry can render: a name, help, type and its values at scrape time. */
abstract class Rendered {
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  protected readonly index = new SeriesIndex();

  constructor(name: string, help: string, type: 'counter' | 'histogram', registry: Registry) {
    this.name = name;
    this.help = help;
    this.type = type;
    registry.registerMetric(this as unknown as Metric);
  }

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const { name, help, type, aggregator } = this;
    return Promise.resolve({ name, help, type, aggregator, values: this.values() });
  }

  reset(): void {
    this.index.reset();
  }

  protected abstract values(): Value[];
}

/** outrigger_requests_total: by direction, Service, caller, status and proxy error code. */
export class RequestCounter extends Rendered {
  constructor(name: string, help: string, registry: Registry) {
    super(name, help, 'counter', registry);
  }

  inc(direction: string, service: string, caller: string, status: number, error: string): void {
    const key = error === '' ? status : `${status} ${error}`;
    this.index.get(direction, service, caller, key, () => ({
      labels: { direction, service, caller, status: String(status), error },
      count: 0,
      sum: 0,
      buckets: [],
    })).count++;
  }

  protected values(): Value[] {
    return this.index.all.map((s) => ({ labels: s.labels, value: s.count }));
  }
}

/** outrigger_request_duration_seconds: by direction, Service and caller. */
export class LatencyHistogram extends Rendered {
  readonly #bounds: readonly number[];

  constructor(name: string, help: string, bounds: readonly number[], registry: Registry) {
    super(name, help, 'histogram', registry);
    this.#bounds = bounds;
  }

  observe(direction: string, service: string, caller: string, seconds: number): void {
    const s = this.index.get(direction, service, caller, '', () => ({
      labels: { direction, service, caller },
      count: 0,
      sum: 0,
      buckets: new Array<number>(this.#bounds.length + 1).fill(0),
    }));
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    s.buckets[i]!++;
    s.count++;
    s.sum += seconds;
  }

  protected values(): Value[] {
    const out: Value[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.index.all) {
      let acc = 0;
      // As prom-client renders its own histograms: `le` first, then the series' labels.
      const le = (bound: number | string, value: number): Value => ({
        labels: { le: bound },
        sharedLabels: s.labels,
        value,
        metricName: bucket,
      });
      this.#bounds.forEach((bound, i) => out.push(le(bound, (acc += s.buckets[i]!))));
      out.push(le('+Inf', s.count));
      out.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      out.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return out;
  }
}
