// A zip checked without writing anything: the control plane refuses a bad
// archive when a package names it, before any build or instance would trip
// over it, and before it is kept. Every entry is inflated and counted (the
// sizes a zip declares can lie) and the tree is modelled as extraction would
// build it (tree-model.ts). Extraction holds to the same rules again on its
// own, and writes nothing through a link whatever the archive says.
import type yauzl from 'yauzl';
import { FlintError } from '../api/errors.ts';
import { ArchiveTree } from './tree-model.ts';
import { checkEntryName, entryKind, nextEntry, openZip, readEntry, readLinkTarget } from './zip-read.ts';

export interface InspectLimits {
  maxEntries: number;
  /** Cap on the unpacked total. */
  maxBytes: number;
}

export interface ZipSummary {
  entries: number;
  /** Unpacked total. */
  bytes: number;
}

const tooLarge = (message: string) => new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', message);

/** Checks every entry of the zip (a file path, or its bytes); rejects with FLINT_ERR_BAD_ARCHIVE or FLINT_ERR_PAYLOAD_TOO_LARGE naming the entry. */
export async function inspectZip(zipFile: string | Buffer, limits: InspectLimits): Promise<ZipSummary> {
  const zip = await openZip(zipFile);
  try {
    return await walk(zip, limits);
  } finally {
    zip.close();
  }
}

async function walk(zip: yauzl.ZipFile, limits: InspectLimits): Promise<ZipSummary> {
  const tree = new ArchiveTree();
  let entries = 0;
  let declared = 0;
  let bytes = 0;
  for (let entry = await nextEntry(zip); entry; entry = await nextEntry(zip)) {
    if (++entries > limits.maxEntries) throw tooLarge(`the archive has more than ${limits.maxEntries} entries`);
    // The declared total first: a bomb is refused before anything inflates.
    declared += entry.uncompressedSize;
    if (declared > limits.maxBytes) throw tooLarge(`the archive unpacks to more than ${limits.maxBytes} bytes (at entry '${entry.fileName}')`);
    await checkEntryName(zip, entry);
    const kind = entryKind(entry);
    if (kind === 'link') {
      tree.add(entry.fileName, kind, await readLinkTarget(zip, entry));
      continue;
    }
    tree.add(entry.fileName, kind);
    await readEntry(zip, entry, (c) => {
      bytes += c.length;
      if (bytes > limits.maxBytes) throw tooLarge(`the archive unpacks to more than ${limits.maxBytes} bytes (at entry '${entry.fileName}')`);
    });
  }
  tree.finish();
  return { entries, bytes };
}
