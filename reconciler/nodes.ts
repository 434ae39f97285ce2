import type { ObservedNode, ObservedSlot, SlotView } from "./observed.js";

/** Whether `node` satisfies a slot's placement (what Swarm's constraints say, checked against an observed node). */
export function nodeMatches(view: Pick<SlotView, "spec">, node: Pick<ObservedNode, "id" | "hostname" | "labels">): boolean {
  const placement = view.spec.placement;
  if (placement === undefined) return true;
  if (placement.node !== undefined && placement.node !== node.id && placement.node !== node.hostname) return false;
  return Object.entries(placement.labels).every(([k, v]) => node.labels[k] === v);
}

/** Node labels as `key=value` words in key order, joined by `sep` (what plans, warnings and `hal0 status` print). */
export function labelsText(labels: Readonly<Record<string, string>>, sep = ", "): string {
  return Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`).join(sep);
}

/** The nodes Swarm could start a slot on now: ready, active, and matching its placement. */
export function placeableOn(view: Pick<SlotView, "spec">, nodes: readonly ObservedNode[]): ObservedNode[] {
  return nodes.filter((n) => n.state === "ready" && n.availability === "active" && nodeMatches(view, n));
}

/** A node of a multi-node runtime as `hal0 status` and `/api/status` list it: the observed node and the slots whose tasks are on it. */
export interface NodeStatus extends ObservedNode {
  /** The slots whose current task is on this node, by name. */
  readonly slots: readonly string[];
}

/** Each observed node with the slots on it; a slot whose task is on no listed node is not shown (it is unplaced). */
export function nodeRows(nodes: readonly ObservedNode[], slots: Readonly<Record<string, ObservedSlot>>): NodeStatus[] {
  const on = new Map<string, string[]>();
  for (const name of Object.keys(slots).sort()) {
    const id = slots[name]!.node?.id;
    if (id !== undefined) on.set(id, [...(on.get(id) ?? []), name]);
  }
  return nodes.map((n) => ({ ...n, slots: on.get(n.id) ?? [] }));
}
