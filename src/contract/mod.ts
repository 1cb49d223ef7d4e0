/**
 * The callback contract shared by the HTTP worker, the callback receiver and users' own receivers:
 * callback URLs and signatures (docs/reference/protocol.md, "Callback URLs and endpoints" and
 * "Signatures").
 *
 * @module
 */

export {
  CALLBACK_ACTIONS,
  type CallbackAction,
  callbackUrl,
  DEFAULT_CALLBACK_PATH_PREFIX,
  isUuid,
  normalizePathPrefix,
} from "./callback_url.ts";
export { parseSecret, sign, SIGNATURE_HEADER, verify } from "./signature.ts";
