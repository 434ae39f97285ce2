// Observed state and the planner's inputs
export { emptyInventory, type Observed, type ObservedSlot, type SlotView, type SlotHealth, type ForeignPort, type Inventory, type HermesCredentials } from "./observed.js";

// Planning (pure) and its text / JSON forms
export { planChanges, planSlotChange, type PlanOptions } from "./plan.js";
export { slotView } from "./view.js";
export { observedDigests, movedResources, describeMoves } from "./digest.js";
export { formatPlan, planJson, type FormatOptions } from "./format.js";

// Observing and executing (I/O)
export { observe, type ObserveAllOptions, type PortAnswers } from "./observe.js";
export { converge, previewPlan, holdBack, PlanStaleError, type ConvergeTarget, type ConvergeOptions, type Converged } from "./converge.js";
export type { ExecEvent, StepResult } from "./execute.js";
export { StateStore, type SlotOutcome } from "./state.js";
export { acquireLock, LockedError, type LockHolder } from "./lock.js";

// Drivers
export { DriverError, type SlotDriver, type StartOptions, type StartPhase } from "./drivers/driver.js";
export { ProcessDriver } from "./drivers/process.js";

// File helpers shared by the state folder and the CLI
export { linkTarget, replaceFileKeeping, writeFileAtomic } from "./atomic.js";
