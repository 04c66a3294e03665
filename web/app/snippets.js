// Ready-made ways to connect to an account, shown with copy buttons.
import { slug } from './format.js';

/** snippets are the ready-made ways to connect, with the creds file a
 * user's Download saves (named after the user; "user" here). */
export function snippets(a, credsName) {
  const creds = credsName || `${slug(a.name)}-user.creds`;
  const ctx = slug(a.name);
  return [
    ['nats-context', 'nats CLI: save a context', `nats context add ${ctx} --server ${a.nats_url} --creds ./${creds} --select`],
    ['nats-pub', 'nats CLI: publish', `nats --server ${a.nats_url} --creds ./${creds} pub orders.new 'hello'`],
    ['go', 'Go (nats.go)', `package main

import (
	"log"

	"github.com/nats-io/nats.go"
)

func main() {
	nc, err := nats.Connect("${a.nats_url}", nats.UserCredentials("${creds}"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	if err := nc.Publish("orders.new", []byte("hello")); err != nil {
		log.Fatal(err)
	}
}`],
    ['js', 'JavaScript (nats.js)', `import { connect, credsAuthenticator } from "@nats-io/transport-node";
import { readFileSync } from "node:fs";

const nc = await connect({
  servers: "${a.nats_url}",
  authenticator: credsAuthenticator(readFileSync("${creds}")),
});
nc.publish("orders.new", "hello");
await nc.drain();`],
  ];
}
