// The same enc:v1 vector with Node's crypto, the way the original UI (crypto.ts) works:
// hkdfSync + aes-256-gcm with setAuthTag/getAuthTag and "base64url". Usage: node gen_enc_v1.mjs
import { createCipheriv, createDecipheriv, hkdfSync } from "node:crypto";

const serviceRoleKey = "test-service-role-key/2026+é";
const iv = Buffer.from([...Array(12).keys()]);
const plaintext = "sk-ant-api03-Ünïcødé €uro ✓ 'quoted' $HOME";

const key = Buffer.from(hkdfSync("sha256", Buffer.from(serviceRoleKey, "utf8"),
                                 Buffer.from("yourhq-secrets-v1"), Buffer.from("aes-256-gcm"), 32));
const cipher = createCipheriv("aes-256-gcm", key, iv);
const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
const tag = cipher.getAuthTag();
const value = "enc:v1:" + [iv, tag, ciphertext].map((b) => b.toString("base64url")).join(".");

const [i, t, c] = value.slice("enc:v1:".length).split(".").map((p) => Buffer.from(p, "base64url"));
const decipher = createDecipheriv("aes-256-gcm", key, i);
decipher.setAuthTag(t);
const back = Buffer.concat([decipher.update(c), decipher.final()]).toString("utf8");
if (back !== plaintext) throw new Error("round trip failed");

console.log("derived key hex: ", key.toString("hex"));
console.log("value:           ", value);
