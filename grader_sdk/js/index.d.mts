// TypeScript looks for index.d.mts beside index.mjs; the types live in index.d.ts.
export * from './index.js';
