/** Every state an approval request can be in (server/approvals.ts): a module of its own, so the CLI can check `--only` without loading the store. */
export const APPROVAL_STATES = ["pending", "approved", "executing", "executed", "failed", "denied", "expired", "stale"] as const;
export type ApprovalState = (typeof APPROVAL_STATES)[number];
