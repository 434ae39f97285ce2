import type { Route } from "../route.js";
import { activityRoutes } from "./activity.js";
import { approvalRoutes } from "./approvals.js";
import { capabilityRoutes } from "./capabilities.js";
import { mcpRoutes } from "./mcp.js";
import { modelRoutes } from "./models.js";
import { modelPullRoutes } from "./models-pull.js";
import { modelExtraRoutes } from "./models-extra.js";
import { modelStoreRoutes } from "./models-store.js";
import { hostProbeRoutes } from "./host-probes.js";
import { planRoutes } from "./plans.js";
import { profileRoutes } from "./profiles.js";
import { stackRoutes } from "./stacks.js";
import { upstreamRoutes } from "./upstreams.js";
import { settingsRoutes } from "./settings.js";
import { systemRoutes } from "./system.js";
import { tokenRoutes } from "./tokens.js";
import { slotRoutes } from "./slots.js";
import { providerRoutes } from "./providers.js";
import { slotExtraRoutes } from "./slot-extras.js";
import { metricsRoutes } from "./metrics.js";
import { serviceRoutes } from "./services.js";
import { logRoutes } from "./logs.js";
import { runnerImageRoutes } from "./runner-images.js";
import { backendRoutes } from "./backends.js";
import { statsRoutes } from "./stats.js";

/**
 * The route table: the single source of truth for REST, and for the MCP
 * tools built from each route's `tools` aliases. Order matters only for
 * reading; the router prefers static segments over `{params}`.
 */
export const ROUTES: readonly Route[] = withRevealPeers([
  ...planRoutes,
  ...modelRoutes,
  ...modelPullRoutes,
  ...modelExtraRoutes,
  ...modelStoreRoutes,
  ...hostProbeRoutes,
  ...profileRoutes,
  ...stackRoutes,
  ...approvalRoutes,
  ...activityRoutes,
  ...settingsRoutes,
  ...systemRoutes,
  ...slotRoutes,
  ...upstreamRoutes,
  ...capabilityRoutes,
  ...mcpRoutes,
  ...tokenRoutes,
  ...providerRoutes,
  ...slotExtraRoutes,
  ...metricsRoutes,
  ...serviceRoutes,
  ...logRoutes,
  ...runnerImageRoutes,
  ...backendRoutes,
  ...statsRoutes,
]);

/** Each route that reveals what others do (`reveals`, `alsoReveals`) with those others' tools (`revealPeers`), judged with them. */
function withRevealPeers(routes: readonly Route[]): Route[] {
  return routes.map((route) => {
    const shown = [...(route.reveals === undefined ? [] : [route.reveals]), ...(route.alsoReveals ?? [])];
    if (shown.length === 0) return route;
    const peers = routes.filter((r) => r !== route && r.reveals !== undefined && shown.includes(r.reveals)).flatMap((r) => r.tools ?? (r.policyTool === undefined ? [] : [r.policyTool]));
    return { ...route, revealPeers: peers };
  });
}
