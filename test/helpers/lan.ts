import { execFileSync } from "node:child_process";
import { networkInterfaces } from "node:os";

/** The dummy link this suite makes when the machine has no address beyond loopback, and the address it gives it (TEST-NET-2). */
const LINK = "hal0lan0";
const ADDRESS = "198.51.100.7";

const existing = () => Object.values(networkInterfaces()).flat().find((i) => i !== undefined && !i.internal && i.family === "IPv4")?.address;

/**
 * An IPv4 address of this machine beyond loopback (a LAN's): a caller from
 * there is no loopback caller. A machine with none gets one on a dummy link
 * of the tests' own (root, as `.ci/run` runs). Never undefined: a test that
 * needs one fails, it does not skip, when none can be had.
 */
export function lanAddress(): string {
  const found = existing();
  if (found !== undefined) return found;
  try {
    execFileSync("ip", ["link", "add", LINK, "type", "dummy"], { stdio: "ignore" });
  } catch {
    // made already by another suite of this run
  }
  execFileSync("ip", ["addr", "replace", `${ADDRESS}/32`, "dev", LINK]);
  execFileSync("ip", ["link", "set", LINK, "up"]);
  const made = existing();
  if (made === undefined) throw new Error(`no address beyond loopback, and none could be given to a dummy link ${LINK}`);
  return made;
}
