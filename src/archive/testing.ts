// For tests: zips that zip tools refuse to write (unsafe names, symlinks
// leaving the tree, sizes that lie, local headers that disagree with the
// central directory), built byte by byte.
import zlib from 'node:zlib';

export interface RawEntry {
  name: string;
  /** The entry's content (a symlink's target). */
  data?: Buffer;
  symlink?: boolean;
  /** Deflate the content (else it is stored). */
  deflate?: boolean;
  /** The uncompressed size written in both headers, true or not. */
  declaredSize?: number;
  /** The name written in the local header, when it should differ from the central directory's. */
  localName?: string;
}

/** A zip of `entries` in this order, whatever their names, made by unix (so the mode bits count). */
export function rawZipOf(entries: RawEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const data = e.data ?? Buffer.alloc(0);
    const body = e.deflate ? zlib.deflateRawSync(data) : data;
    const crc = zlib.crc32(data);
    const size = e.declaredSize ?? data.length;
    const n = Buffer.from(e.name);
    const ln = Buffer.from(e.localName ?? e.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(ln.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(0x0314, 4); // made by unix, so the mode below counts
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(e.deflate ? 8 : 0, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(n.length, 28);
    const mode = e.symlink ? 0o120777 : e.name.endsWith('/') ? 0o40755 : 0o100644;
    central.writeUInt32LE((mode << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, ln, body);
    centrals.push(central, n);
    offset += local.length + ln.length + body.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

/** A zip with one stored entry, whatever its name; `symlink` marks it a unix symlink whose target is `data`. */
export function rawZip(name: string, data: Buffer, opts: { symlink?: boolean } = {}): Buffer {
  return rawZipOf([{ name, data, symlink: opts.symlink }]);
}
