/**
 * The port while the server waits for its database at start (db/awaitDatabase.ts): `GET /livez`
 * answers 200 (the process is alive and will serve once the database answers, so an orchestrator
 * need not restart it), and every other request 503 `not_ready` in the error envelope, with
 * `Retry-After`, so load balancers keep traffic elsewhere and clients retry. It closes, connections
 * and all, just before the real server takes the port.
 */
import * as Effect from "effect/Effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { corsHeadersOf } from "./cors.ts"
import { envelopeOf } from "./ErrorEnvelope.ts"
import { answerHeaders, refuseAndClose, writeJson } from "./lane/respond.ts"
import { newRequestId } from "./RequestId.ts"
import { createNodeServer, listen } from "./Server.ts"

const LIVE = { status: "ok" }

/** Listens on the configured host and port until the scope closes; fails as the real server would. */
export const startingListener = (database: string) =>
  Effect.gen(function*() {
    const config = yield* GatewayConfig
    const notReady = {
      ...envelopeOf(
        503,
        `Not ready: the gateway is starting and its database (${database}) does not answer yet; retry later.`,
        "not_ready"
      ),
      headers: { "retry-after": "5" }
    }
    // The CORS headers the real server gives (a page can read why it was refused).
    const corsOf = corsHeadersOf(config.file.server.cors_origins)
    const answer = (req: IncomingMessage, res: ServerResponse) => {
      const cors = corsOf(req.headers.origin)
      if (req.method !== "GET" || req.url !== "/livez") return refuseAndClose(req, res, notReady, cors)
      const requestId = newRequestId()
      res.shouldKeepAlive = false
      writeJson(res, 200, LIVE, answerHeaders(req, requestId, cors))
    }
    const server = yield* Effect.acquireRelease(
      Effect.sync(() => createNodeServer(config.file.server)),
      (s) =>
        Effect.async<void>((resume) => {
          s.close(() => resume(Effect.void))
          s.closeAllConnections()
        })
    )
    server.on("request", answer)
    yield* listen(server, config)
    yield* Effect.logInfo(
      `listening on ${config.host}:${config.port} while the database is out of reach: /livez answers 200, every other request 503`
    )
  })
