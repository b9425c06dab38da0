/** Tollgate's version: the CLI's `--version`, the OpenAPI document's `info.version`, the traces' service. Kept equal to package.json's (test/http/health.test.ts). */
export const VERSION = "0.1.0"
