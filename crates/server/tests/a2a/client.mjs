// The official A2A JavaScript SDK's client (@a2a-js/sdk 1.3.0, installed into .npm-a2a by
// scripts/test) against Holdpoint's A2A endpoint, for crates/server/tests/suite/a2a_sdk.rs.
//
//     node client.mjs SDK_PREFIX URL TEXT
//
// SDK_PREFIX is where npm installed the SDK (.npm-a2a); URL the agent's endpoint
// (…/a2a/lab/helper); HP_TOKEN the token to send. Fetches the card (which needs the token) and
// sends TEXT as one message, awaiting the answer; prints the task as one JSON line.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

const [prefix, url, text] = process.argv.slice(2);
const require = createRequire(join(prefix, 'package.json'));
const {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} = require('@a2a-js/sdk/client');
const { Role, TaskState } = require('@a2a-js/sdk');

// Every request, the card's included, carries the token.
const token = process.env.HP_TOKEN;
const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  }),
);
// The card is beside the endpoint, not at the origin's root: its full URL, and no path.
const client = await factory.createFromUrl(`${url}/.well-known/agent-card.json`, '');

const task = await client.sendMessage({
  message: {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    contextId: '',
    taskId: '',
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration: undefined,
  metadata: undefined,
  tenant: '',
});
const answer = (task.artifacts ?? [])
  .flatMap((a) => a.parts)
  .filter((p) => p.content?.$case === 'text')
  .map((p) => p.content.value)
  .join('');
console.log(
  JSON.stringify({
    id: task.id,
    contextId: task.contextId,
    state: TaskState[task.status?.state] ?? task.status?.state,
    answer,
  }),
);
