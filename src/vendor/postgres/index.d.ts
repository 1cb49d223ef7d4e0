// The types of the vendored postgres.js are those of the npm package it was copied from (README.md),
// at the same version (written by tools/vendor_postgres.ts).
import postgres from "npm:postgres@3.4.9";
export default postgres;
