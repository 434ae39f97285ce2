/**
 * A secret-looking flag of an argv (`--api-key`, `--hf-token`): the word after
 * it (or after its `=`) is a secret. `-hft` is llama-server's short form of
 * `--hf-token` (fixtures/llama-server/help.txt: the only short form of a secret
 * flag there); `--api-key-file` is not one, its value is a path. What the reply
 * redactor masks and the docker runtime seals in a label.
 */
export const SECRET_FLAG = /^(?:--?[a-z0-9-]*(?:api-?key|token|secret|password|passwd)|-hft)$/i;
