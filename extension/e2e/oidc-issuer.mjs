// A real OpenID provider for the console's single sign-on tests: oidc-provider
// (a certified implementation) on 127.0.0.1:0 with its development login page,
// which takes any login and password. The issuer's address is known at once, so
// latchkeyd can be configured with it; the client (latchkeyd's callback address)
// is registered once latchkeyd is listening.

import { createServer } from 'node:http';
import Provider from 'oidc-provider';

/**
 * Start the issuer. `register({clientId, clientSecret, redirectUri, accounts})`
 * makes it answer; `accounts` maps a login to its claims (`email`,
 * `email_verified`, `name`). Until then every request gets 503. `extra` is
 * more of oidc-provider's configuration (`conformIdTokenClaims: false` puts
 * the address in the ID token rather than only at the UserInfo endpoint).
 */
export async function startIssuer(extra = {}) {
  let handler = (_req, res) => {
    res.statusCode = 503;
    res.end('not configured yet');
  };
  const server = createServer((req, res) => handler(req, res));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${server.address().port}`;
  return {
    issuer,
    register({ clientId, clientSecret, redirectUri, accounts }) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
          },
        ],
        claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
        findAccount: (_ctx, id) =>
          accounts[id] ? { accountId: id, claims: () => ({ sub: id, ...accounts[id] }) } : undefined,
        features: { devInteractions: { enabled: true } },
        cookies: { keys: ['latchkey-e2e-only'] },
        ...extra,
      });
      handler = provider.callback();
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
