/** Admission's in-place answer as an effect, for tests: the reservation, or its refusal as the failure. */
import { Effect } from "effect"
import type { Admission } from "../../src/accounts/Admission.ts"
import { QuotaExceeded } from "../../src/accounts/errors.ts"

export const admitting = (admission: Admission, keyId: string, worstCase: bigint) =>
  Effect.suspend(() => {
    const admitted = admission.admitNow(keyId, worstCase)
    return admitted instanceof QuotaExceeded ? Effect.fail(admitted) : Effect.succeed(admitted)
  })
