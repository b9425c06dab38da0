/** The account commands: `tollgate keys ...` and `tollgate vendors ...`. */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Option from "effect/Option"
import { described, json, list, operation, opt } from "./execute.ts"

const keysCreate = Command.make("create", {
  quotaUsd: Options.text("quota-usd").pipe(Options.withDescription("the key's quota in USD, e.g. 10 or 2.50")),
  name: Options.text("name").pipe(described("a name to recognise the key by"), Options.optional),
  serverOption: Options.text("server-option").pipe(
    described("the Server Option whose models and limits the key gets (default: the config's default_server_option)"),
    Options.optional
  ),
  models: Options.text("models").pipe(Options.withDescription("comma-separated allow-list"), Options.optional),
  expiresAt: Options.text("expires-at").pipe(Options.withDescription("ISO-8601 date-time"), Options.optional),
  rpm: Options.integer("rpm").pipe(
    Options.withDescription("requests per minute (default: the Server Option's)"),
    Options.optional
  ),
  tpm: Options.integer("tpm").pipe(
    Options.withDescription("tokens per minute (default: the Server Option's)"),
    Options.optional
  ),
  json
}, (o) =>
  operation({
    _tag: "keys.create",
    quotaUsd: o.quotaUsd,
    name: opt(o.name),
    serverOption: opt(o.serverOption),
    models: Option.map(o.models, list).pipe(opt),
    expiresAt: opt(o.expiresAt),
    requestsPerMinute: opt(o.rpm),
    tokensPerMinute: opt(o.tpm)
  }, o.json)).pipe(Command.withDescription("create an API key; prints the key once"))

const keysList = Command.make("list", { json }, ({ json }) => operation({ _tag: "keys.list" }, json)).pipe(
  Command.withDescription("list every key with its status, quota and usage")
)
export const keyId = Args.text({ name: "KEY_ID" }).pipe(Args.withDescription("the key's id, e.g. key_abc123"))
const keysRevoke = Command.make(
  "revoke",
  { keyId, json },
  ({ json, keyId }) => operation({ _tag: "keys.revoke", keyId }, json)
).pipe(Command.withDescription("revoke a key: its calls are refused from then on"))
const keysGrant = Command.make(
  "grant",
  {
    keyId,
    usd: Options.text("usd").pipe(Options.withDescription("USD to add to the key's quota")),
    reason: Options.text("reason").pipe(described("why, kept in the event"), Options.optional),
    json
  },
  (o) => operation({ _tag: "keys.grant", keyId: o.keyId, usd: o.usd, reason: opt(o.reason) }, o.json)
).pipe(Command.withDescription("top up a key's quota (a QuotaGranted event)"))
const keysMove = Command.make(
  "move",
  {
    keyId,
    serverOption: Options.text("server-option").pipe(Options.withDescription("the Server Option the key moves to")),
    models: Options.text("models").pipe(
      described("comma-separated allow-list on that option (default: all its models)"),
      Options.optional
    ),
    json
  },
  (o) =>
    operation({
      _tag: "keys.move",
      keyId: o.keyId,
      serverOption: o.serverOption,
      models: Option.map(o.models, list).pipe(opt)
    }, o.json)
).pipe(Command.withDescription("move a key to another Server Option (one a configuration change left it without)"))
export const keys = Command.make("keys").pipe(
  Command.withSubcommands([keysCreate, keysList, keysRevoke, keysGrant, keysMove]),
  Command.withDescription("create, list, revoke, top up and move API keys")
)

const vendorsCreate = Command.make("create", {
  name: Options.text("name").pipe(described("the vendor's name")),
  scopes: Options.text("scopes").pipe(Options.withDescription("comma-separated, e.g. keys:create,server-options:read")),
  serverOptions: Options.text("server-options").pipe(
    described("comma-separated Server Options its keys may use (default: all)"),
    Options.optional
  ),
  creditUsd: Options.text("credit-usd").pipe(
    Options.withDescription("credit the vendor may hand out as key quota"),
    Options.optional
  ),
  json
}, (o) =>
  operation({
    _tag: "vendors.create",
    name: o.name,
    scopes: list(o.scopes),
    serverOptions: Option.map(o.serverOptions, list).pipe(opt),
    creditUsd: opt(o.creditUsd)
  }, o.json)).pipe(Command.withDescription("register a vendor; prints its token once"))
const vendorsList = Command.make("list", { json }, ({ json }) => operation({ _tag: "vendors.list" }, json)).pipe(
  Command.withDescription("list every vendor with its Server Options and credit")
)
const vendorId = Args.text({ name: "VENDOR_ID" }).pipe(Args.withDescription("the vendor's id, e.g. vnd_abc123"))
const vendorsCredit = Command.make("credit", {
  vendorId,
  usd: Options.text("usd").pipe(
    Options.withDescription("USD of credit to add (what the vendor may hand out as quota)")
  ),
  json
}, (o) => operation({ _tag: "vendors.credit", vendorId: o.vendorId, usd: o.usd }, o.json)).pipe(
  Command.withDescription("grant a vendor credit")
)
const vendorsToken = Command.make(
  "token",
  {
    vendorId,
    scopes: Options.text("scopes").pipe(described("comma-separated scopes of the new token")),
    expiresAt: Options.text("expires-at").pipe(described("ISO-8601 date-time"), Options.optional),
    json
  },
  (o) =>
    operation(
      { _tag: "vendors.token", vendorId: o.vendorId, scopes: list(o.scopes), expiresAt: opt(o.expiresAt) },
      o.json
    )
)
  .pipe(Command.withDescription("issue another token for a vendor; prints it once"))
const vendorsRevokeToken = Command.make("revoke-token", {
  tokenId: Args.text({ name: "TOKEN_ID" }).pipe(Args.withDescription("the token's id, e.g. vtk_abc123")),
  json
}, (o) => operation({ _tag: "vendors.revokeToken", tokenId: o.tokenId }, o.json)).pipe(
  Command.withDescription("revoke a vendor token")
)
const vendorsEntitle = Command.make("entitle", {
  vendorId,
  serverOptions: Options.text("server-options").pipe(
    Options.withDescription("comma-separated Server Options its keys may use from now on")
  ),
  json
}, (o) => operation({ _tag: "vendors.entitle", vendorId: o.vendorId, serverOptions: list(o.serverOptions) }, o.json))
  .pipe(Command.withDescription("set the Server Options a vendor may attach (its keys keep theirs)"))
export const vendors = Command.make("vendors").pipe(
  Command.withSubcommands([
    vendorsCreate,
    vendorsList,
    vendorsCredit,
    vendorsEntitle,
    vendorsToken,
    vendorsRevokeToken
  ]),
  Command.withDescription("register vendors, set their Server Options, grant credit, issue and revoke their tokens")
)
