import type { Model } from "../compiler/index.js";
import type { ObserveOptions, PortHolder, SlotDriver } from "./drivers/driver.js";
import type { ForeignPort, HermesCredentials, Inventory, Observed, ObservedHermesProfile, ObservedSlot } from "./observed.js";
import type { StateStore } from "./state.js";
import { observeHermesFile, observeHermesHome, readHermesProfiles } from "./hermes-files.js";
import { hermesHome, hermesIdentity, profileFile } from "./hermes-plan.js";

/** A pass's answers to "who holds this port", per driver and port (`ObserveAllOptions.portHolders`). */
export type PortAnswers = WeakMap<SlotDriver, Map<number, Promise<PortHolder | undefined>>>;

export interface ObserveAllOptions extends ObserveOptions {
  /** Where the Hermes profiles' agent tokens are (the composition root's TokenStore); without it the observation has no `hermes_tokens`. */
  readonly hermesCredentials?: HermesCredentials;
  /** Also read the default Hermes profile (`<[hermes] home>/config.yaml`), for a plan with `hermesDefault`. */
  readonly hermesDefault?: boolean;
  /** false: hermes-managed.json is not read (`hal0 down`, which plans no Hermes change, stops the box whatever that file holds). */
  readonly hermesRecord?: boolean;
  /**
   * Who holds each port, as asked already by the other observations of one
   * pass (an inbox render observes the box once per pending request, each
   * with its own model, at one moment): each port is asked once per pass, not
   * once per observation (per driver: an observation with another runtime
   * asks its own). Absent: every port asked afresh.
   */
  readonly portHolders?: PortAnswers;
}

/**
 * One snapshot of everything the planner needs, taken before planning: the
 * runtime's slots, the settings last applied, the inventory, who holds the
 * port of each desired slot that is not running as ours, and each named Hermes
 * profile's config.yaml with what hal0 recorded writing there and the
 * fingerprint of the token hal0 hands on to it (never minting one). All I/O
 * of a plan happens here. Without a driver (a Hermes-only repair that needs
 * no engine) the observation has no slots; a plan from it must not select any.
 */
export async function observe(model: Model, driver: SlotDriver | undefined, state: StateStore, options: ObserveAllOptions = {}): Promise<{ observed: Observed; inventory: Inventory }> {
  const { hermesCredentials, hermesDefault, hermesRecord, portHolders, ...driverOptions } = options;
  const [slots, nodes, inventory, applied, hermes_profiles, hermes_managed, hermes_default, hermes_home] = await Promise.all([
    driver ? driver.observe({ desiredEnv: (name) => model.slots[name]?.spec.env, desiredArgv: (name) => model.slots[name]?.spec.argv, ...driverOptions }) : [], driver?.nodes ? driver.nodes() : undefined, state.readInventory(), state.readAppliedSettings(), readHermesProfiles(hermesHome(model)), hermesRecord === false ? { profiles: {} } : state.readHermesManaged(),
    hermesDefault ? observeHermesFile(profileFile(hermesHome(model), null)) : undefined, observeHermesHome(hermesHome(model)),
  ]);
  const byName: Record<string, ObservedSlot> = {};
  for (const slot of [...slots].sort((a, b) => (a.name < b.name ? -1 : 1))) byName[slot.name] = slot;
  const foreign_ports = driver ? await foreignPorts(model, byName, driver, portHolders) : {};
  const hermes_tokens = hermesCredentials ? hermesTokens(hermes_profiles, hermes_default !== undefined, hermesCredentials) : undefined;
  return {
    observed: { slots: byName, ...(nodes ? { nodes } : {}), applied_settings: applied, foreign_ports, hermes_profiles, hermes_managed, hermes_home, ...(hermes_default ? { hermes_default } : {}), ...(hermes_tokens ? { hermes_tokens } : {}) },
    inventory,
  };
}

/** Per observed profile's identity, the fingerprint of the token hal0 hands on (null: none live yet). */
function hermesTokens(profiles: Readonly<Record<string, ObservedHermesProfile>>, withDefault: boolean, credentials: HermesCredentials): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  if (withDefault) out[hermesIdentity(null)] = credentials.fingerprint(hermesIdentity(null));
  for (const name of Object.keys(profiles).sort()) out[hermesIdentity(name)] = credentials.fingerprint(hermesIdentity(name));
  return out;
}

async function foreignPorts(model: Model, slots: Readonly<Record<string, ObservedSlot>>, driver: SlotDriver, answers?: PortAnswers): Promise<Record<string, ForeignPort>> {
  const ourPorts = new Set(Object.values(slots).filter((s) => s.running && s.record).map((s) => s.record!.view.port));
  // A running slot whose port changes is asked about too: its replace would stop it for a port it cannot bind.
  // A slot running with no readable record (its port unknown) most likely holds its own port, and its replace stops it first: not asked about.
  const unknown = new Set(Object.values(slots).filter((s) => s.running && !s.record).map((s) => s.name));
  const wanted = Object.values(model.slots).filter((s) => s.enabled && !ourPorts.has(s.port) && !unknown.has(s.name));
  let asked = answers?.get(driver);
  if (answers !== undefined && asked === undefined) answers.set(driver, (asked = new Map()));
  const holderOf = (port: number): Promise<PortHolder | undefined> => {
    if (asked === undefined) return driver.portHolder(port);
    let holder = asked.get(port);
    if (holder === undefined) asked.set(port, (holder = driver.portHolder(port)));
    return holder;
  };
  const holders = await Promise.all(wanted.map(async (s) => [s.name, s.port, await holderOf(s.port)] as const));
  const out: Record<string, ForeignPort> = {};
  for (const [name, port, holder] of holders) if (holder) out[name] = { port, ...holder };
  return out;
}
