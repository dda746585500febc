// AES-256-GCM encryption of secrets stored at rest (webhook signing secrets). The key comes from
// WEBHOOK_SECRET_KEY or is generated once into DATA_DIR/secret-key.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface SecretBox {
  seal(plain: string): string;
  /** Null when the ciphertext cannot be decrypted (for example after the key changed). */
  open(sealed: string): string | null;
}

export function createSecretBox(key: Buffer): SecretBox {
  return {
    seal(plain) {
      const iv = crypto.randomBytes(12);
      const c = crypto.createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
      return `v1.${iv.toString('base64url')}.${body.toString('base64url')}.${c.getAuthTag().toString('base64url')}`;
    },
    open(sealed) {
      const [v, iv, body, tag] = sealed.split('.');
      if (v !== 'v1' || !iv || !body || !tag) return null;
      try {
        const d = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
        d.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([d.update(Buffer.from(body, 'base64url')), d.final()]).toString('utf8');
      } catch {
        return null;
      }
    },
  };
}

export function loadSecretKey(configured: string | null, dataDir: string): Buffer {
  if (configured) return Buffer.from(configured, 'hex');
  const file = path.join(path.resolve(dataDir), 'secret-key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, crypto.randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
  }
  return Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'hex');
}
