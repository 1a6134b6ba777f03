// Local mode has no container images: an image names a built-in runtime or
// builder. Any image whose last path segment starts with a known name maps to
// it, whatever the registry and tag, so Fission's images work unchanged.

export const RUNTIMES = ['node', 'python', 'go'] as const;
export type RuntimeName = (typeof RUNTIMES)[number];

export const KNOWN_RUNTIME_IMAGES = RUNTIMES.map((r) => `flint/${r}-env`);
export const KNOWN_BUILDER_IMAGES = RUNTIMES.map((r) => `flint/${r}-builder`);

function lastSegment(image: string): string {
  const noDigest = image.split('@')[0];
  const seg = noDigest.slice(noDigest.lastIndexOf('/') + 1);
  return seg.split(':')[0];
}

function mapImage(image: string, suffix: 'env' | 'builder'): RuntimeName | undefined {
  const seg = lastSegment(image);
  return RUNTIMES.find((r) => seg.startsWith(`${r}-${suffix}`) || (r === 'node' && seg.startsWith(`nodejs-${suffix}`)));
}

export function runtimeForImage(image: string): RuntimeName | undefined {
  return mapImage(image, 'env');
}

export function builderForImage(image: string): RuntimeName | undefined {
  return mapImage(image, 'builder');
}
