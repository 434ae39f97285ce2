import { slotReadRoutes } from "./slots-read.js";
import { slotWriteRoutes } from "./slots-write.js";

/**
 * Every slot route (seed 001's slot_* tools, model_swap and model_assign):
 * reads in slots-read.ts, writes and the restart action in slots-write.ts.
 */
export const slotRoutes = [...slotReadRoutes, ...slotWriteRoutes];
