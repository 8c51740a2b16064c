/** The environment that sends a server pod's outbound HTTP through its egress proxy. */

/** One environment variable of a container (the shape of a Kubernetes `EnvVar` with a literal value). */
export interface EnvVar {
  name: string;
  value: string;
}

/**
 * The variables a server container needs so proxy-aware clients use the egress proxy at `proxyUrl`
 * (`http://<service>:3128`): `HTTP_PROXY` and `HTTPS_PROXY` in both spellings (curl reads only the lower-case
 * `http_proxy`, Go and Python either), and `NODE_USE_ENV_PROXY=1`, without which Node (24) ignores them.
 * `NO_PROXY` (and `no_proxy`) only when `noProxy` names destinations to reach directly (the operator: loopback);
 * otherwise every destination goes through the proxy, which also allows the CIDR rules.
 * @param noProxy hosts, `.domain` suffixes and addresses that bypass the proxy, joined with commas.
 * @throws Error when `proxyUrl` is not an http URL.
 */
export function egressProxyEnv(proxyUrl: string, noProxy: readonly string[] = []): EnvVar[] {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new Error(`egressProxyEnv: ${JSON.stringify(proxyUrl)} is not a URL such as http://my-server-egress:3128`);
  }
  if (url.protocol !== 'http:')
    throw new Error(
      `egressProxyEnv: ${JSON.stringify(proxyUrl)} must be an http: URL (the proxy speaks plain HTTP; TLS runs inside its CONNECT tunnels)`,
    );
  const value = url.origin;
  return [
    { name: 'HTTP_PROXY', value },
    { name: 'HTTPS_PROXY', value },
    { name: 'http_proxy', value },
    { name: 'https_proxy', value },
    { name: 'NODE_USE_ENV_PROXY', value: '1' },
    ...(noProxy.length > 0
      ? [
          { name: 'NO_PROXY', value: noProxy.join(',') },
          { name: 'no_proxy', value: noProxy.join(',') },
        ]
      : []),
  ];
}
