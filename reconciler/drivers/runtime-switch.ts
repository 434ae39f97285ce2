import type { ObservedNode, ObservedSlot, SlotView } from "../observed.js";
import type { EngineLog, ObserveOptions, PortHolder, SlotDriver, StartOptions } from "./driver.js";

/**
 * The runtime while `[slots] runtime` changes: slots hal0 started on another
 * runtime (the inventory names it) are still observed and stopped there, and
 * every start goes to the runtime the settings name now. So the planner sees
 * each old slot running with a spec of the other runtime (a `spec_changed`
 * replace: stopped where it runs, started on the new runtime), and `hal0 down`
 * stops it where it runs. It decides nothing: it only addresses each call.
 *
 * A former runtime that observes nothing of this box (every slot moved or
 * stopped) is dropped, so a long-running `hal0 serve` stops asking it.
 */
export class RuntimeSwitchDriver implements SlotDriver {
  private formers: SlotDriver[];

  constructor(private readonly current: SlotDriver, formers: readonly SlotDriver[]) {
    this.formers = [...formers];
    if (current.nodes) this.nodes = () => current.nodes!();
    if (current.reach) this.reach = (slot) => current.reach!(slot);
  }

  get runtime(): SlotDriver["runtime"] {
    return this.current.runtime;
  }

  /** The slots of every runtime, by name; a name found on two, the running one (the current runtime's when both run). */
  async observe(options?: ObserveOptions): Promise<ObservedSlot[]> {
    const formers = [...this.formers];
    const [now, ...before] = await Promise.all([this.current.observe(options), ...formers.map((d) => d.observe(options))]);
    this.formers = formers.filter((_, i) => before[i]!.length > 0);
    const byName = new Map<string, ObservedSlot>();
    for (const slot of before.flat()) if (!byName.get(slot.name)?.running) byName.set(slot.name, slot);
    for (const slot of now) if (slot.running || !byName.get(slot.name)?.running) byName.set(slot.name, slot);
    return [...byName.values()];
  }

  portHolder(port: number): Promise<PortHolder | undefined> {
    return this.current.portHolder(port);
  }

  start(name: string, view: SlotView, options: StartOptions): Promise<{ pid?: number }> {
    return this.current.start(name, view, options);
  }

  /** Stopped on every runtime it may run on (stopping where it does not run succeeds), the former ones first. */
  async stop(name: string, graceS: number, options?: { readonly renamed?: boolean }): Promise<void> {
    for (const driver of [...this.formers, this.current]) await driver.stop(name, graceS, options);
  }

  /** The log of the runtime that has a runner of that name, the current one first. */
  async logs(name: string, lines: number): Promise<EngineLog | undefined> {
    for (const driver of [this.current, ...this.formers]) {
      const log = await driver.logs?.(name, lines);
      if (log !== undefined) return log;
    }
    return undefined;
  }

  async maintain(): Promise<void> {
    for (const driver of [...this.formers, this.current]) await driver.maintain?.();
  }

  /** The current runtime's nodes, only when it has them (a multi-node runtime): their absence means one box. */
  readonly nodes?: () => Promise<ObservedNode[]>;
  readonly reach?: SlotDriver["reach"];
}
