// The reconciler: observe → plan (pure) → execute, the drivers and the sweep.
// It lands with issue 3 (plan/apply, process runtime) and issue 4 (docker, sweep);
// until then it exports nothing.
export {};
