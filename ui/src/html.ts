// Preact with htm: markup as tagged templates, no JSX build step. Every
// value interpolated into a template becomes a text node or a property,
// never parsed as HTML: names, log lines and response bodies stay text.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
