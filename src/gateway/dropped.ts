/** The client's advisory fields a translation dropped, told at debug level (by name, never a value). */
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"

export const loggedDropped = (requestId: string, dropped: ReadonlyArray<string>): Effect.Effect<void> =>
  dropped.length === 0 ? Effect.void : Effect.whenLogLevel(
    Effect.suspend(() => Effect.logDebug(`${requestId}: dropped in translation: ${dropped.join(", ")}`)),
    LogLevel.Debug
  ).pipe(Effect.asVoid)
