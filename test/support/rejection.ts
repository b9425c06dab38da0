/** What a call of an official SDK failed with, for a test to look at. */
import * as Effect from "effect/Effect"

/** What a promise rejected with (the SDK's error, its fields untyped); fails the test if it resolved. */
export const rejectionOf = (run: () => Promise<unknown>): Effect.Effect<any> =>
  Effect.promise(async () => {
    try {
      await run()
    } catch (e) {
      return e
    }
    throw new Error("expected the call to fail, it succeeded")
  })
