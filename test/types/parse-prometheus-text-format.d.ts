/** parse-prometheus-text-format 1.1.1 ships no types: prom2json's shape, as the tests read it. */
declare module "parse-prometheus-text-format" {
  export interface PromSample {
    readonly labels?: Record<string, string>;
    readonly value?: string;
    /** Histograms: cumulative counts by upper bound (`"0.005"`, …, `"+Inf"`). */
    readonly buckets?: Record<string, string>;
    readonly count?: string;
    readonly sum?: string;
  }
  export interface PromFamily {
    readonly name: string;
    readonly help: string;
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    readonly metrics: readonly PromSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PromFamily[];
}
