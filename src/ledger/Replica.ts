/** This process's name in the log: in every event's metadata, in open requests, in heartbeats. */
import * as Effect from "effect/Effect"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"

export class Replica extends Effect.Service<Replica>()("Ledger/Replica", {
  sync: () => ({ id: `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}` })
}) {}
