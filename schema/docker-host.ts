/**
 * The Docker engine addresses hal0 can use (`[slots] docker_host`,
 * `$DOCKER_HOST`): its socket, `unix:///PATH` (or a bare absolute `/PATH`),
 * or `tcp://` / `http://` on a loopback host with a port. Slots are probed on
 * 127.0.0.1, so an engine on another machine (`ssh://`, a remote `tcp://`)
 * could never have its slots health-checked. No zod here: the docker driver
 * reads it too.
 */

/** `tcp://127.0.0.1:2375`, `http://localhost:2375/`, `tcp://[::1]:2375`: the host (brackets kept) and the port. */
export const DOCKER_TCP_ADDRESS = /^(?:tcp|http):\/\/(127\.0\.0\.1|localhost|\[::1\]):(\d+)\/?$/;

/** What hal0 says of an address it cannot use, or undefined when it can. */
export function dockerHostProblem(host: string): string | undefined {
  if (host.startsWith("/") || host.startsWith("unix:///")) return undefined;
  const tcp = DOCKER_TCP_ADDRESS.exec(host);
  if (tcp && Number(tcp[2]) >= 1 && Number(tcp[2]) <= 65_535) return undefined;
  return `docker engine address ${JSON.stringify(host)} is not unix:///PATH or tcp://127.0.0.1:PORT (slots are health-checked on loopback, so the engine must run on this machine)`;
}
