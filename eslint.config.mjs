// Lint and format in one pass: typescript-eslint's recommended rules, and dprint (through
// @effect/eslint-plugin) as the formatter. `npm run lint` checks, `npm run format` rewrites.
import * as effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import globals from "globals"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["node_modules/**", "data/**", "dist/**", "coverage/**", "bench/results/**", "**/*.d.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  ...effectEslint.configs.dprint,
  {
    languageOptions: { globals: globals.node },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }]
    }
  },
  {
    // A barrel import loads every module of its package at runtime (the sources are bundled with the
    // packages external): @effect/platform's alone brings two API-reference UIs, ~20 MB of strings.
    files: ["src/**/*.ts"],
    rules: {
      "@effect/no-import-from-barrel-package": ["error", {
        packageNames: [
          "effect",
          "@effect/platform",
          "@effect/platform-node",
          "@effect/sql",
          "@effect/sql-pg",
          "@effect/cli",
          "@effect/opentelemetry",
          "@effect/experimental"
        ]
      }]
    }
  },
  {
    // Tests read SDK answers and scripted upstream payloads loosely on purpose.
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" }
  }
)
