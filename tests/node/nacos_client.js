// The Node.js Nacos SDK (nacos-naming, from the npm registry: package-lock.json, `npm ci`),
// driven one JSON command per stdin line by tests/test_nacos_node_client.py; one JSON answer
// per stdout line, and one line per subscription callback. Usage:
//   node tests/node/nacos_client.js HOST:PORT USERNAME PASSWORD
'use strict';

const readline = require('readline');
const { NacosNamingClient } = require('nacos-naming');

const [server, username, password] = process.argv.slice(2);

// The SDK reports a refused call only to its logger (its error says "after all servers
// tried"): the last refusal is kept so an answer can say what the server said.
let lastRefusal = null;
const logger = {
  debug() {},
  info() {},
  warn(err) {
    if (err && err.status) lastRefusal = { status: err.status, text: String(err.message) };
  },
  error(err) {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  },
};

function say(message) {
  process.stdout.write(JSON.stringify(message) + '\n');
}

function address(host) {
  return `${host.ip}:${host.port}`;
}

async function main() {
  const client = new NacosNamingClient({ logger, serverList: server, namespace: 'public', username, password });
  await client.ready();
  const operations = {
    register: c => client.registerInstance(c.service, { ip: c.ip, port: c.port, metadata: c.metadata || {} }),
    deregister: c => client.deregisterInstance(c.service, { ip: c.ip, port: c.port }),
    list: async c => (await client.getAllInstances(c.service, undefined, '', false)).map(address),
    status: () => client.getServerStatus(),
    subscribe: async c => client.subscribe(c.service, hosts => say({ event: 'hosts', service: c.service, hosts: hosts.map(address) })),
  };
  say({ ready: true });
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const command = JSON.parse(line);
    if (command.op === 'close') break;
    lastRefusal = null;
    try {
      say({ op: command.op, ok: true, result: (await operations[command.op](command)) ?? null });
    } catch (err) {
      say({ op: command.op, ok: false, error: String(err.message), refusal: lastRefusal });
    }
  }
  await client.close();
  process.exit(0);
}

main().catch(err => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
