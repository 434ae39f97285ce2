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

/** Why a swarm slot does not run and is not started: Swarm holds its service's task (its node down, no node fits), or no node could take it. */
export type Unplaced = NonNullable<ObservedSlot["unplaced"]>;

/**
 * Whether the planner holds a desired slot that does not run rather than
 * start it (plan.ts's reason `unplaced`), and why: Swarm holds the task of
 * its service, which is as desired (re-creating it would not place it), or
 * no ready, active node matches its placement now (it would start into a
 * Pending service). Undefined when the slot runs or may be started. The
 * planner and the slot's conditions ask the same question.
 */
export function heldUnplaced(view: Pick<SlotView, "spec" | "spec_hash">, seen: ObservedSlot | undefined, nodes: readonly ObservedNode[] | undefined): Unplaced | undefined {
  if (seen?.running) return undefined;
  if (seen?.unplaced !== undefined && seen.record?.view.spec_hash === view.spec_hash) return seen.unplaced;
  if (nodes === undefined || placeableOn(view, nodes).length > 0) return undefined;
  return { reason: "unschedulable", message: `no ready, active node of the swarm matches its placement (${placementWords(view)}); it starts when one does (nodes: ${nodes.map(nodeWords).join("; ") || "none"})` };
}

/** A swarm slot's placement in words. */
function placementWords(view: Pick<SlotView, "spec">): string {
  const p = view.spec.placement;
  if (p === undefined) return "any node";
  const labels = labelsText(p.labels);
  return [p.node !== undefined ? `node ${p.node}` : "", labels !== "" ? `labels ${labels}` : ""].filter(Boolean).join(", ") || "any node";
}

/** A node in a few words: hostname, state, availability, labels. */
function nodeWords(n: ObservedNode): string {
  const labels = labelsText(n.labels, ",");
  return `${n.hostname} ${n.state}/${n.availability}${labels ? ` ${labels}` : ""}`;
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
