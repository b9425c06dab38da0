/**
 * JSON from a peer (an upstream's stream event, an operator endpoint's answer) read where it is
 * used: each field is reached with optional chaining and checked at the point it is taken. Typed
 * codecs replace it where a payload is decoded as a whole.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type LooseJson = any
