/** Every request gets an id, sent back in `x-request-id` and `request-id` and written into its events. */
import * as FiberRef from "effect/FiberRef"
import { randomUUID } from "node:crypto"

export const currentRequestId = FiberRef.unsafeMake("")

export const newRequestId = () => `req_${randomUUID().replaceAll("-", "")}`
