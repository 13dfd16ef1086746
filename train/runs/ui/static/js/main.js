// HELIX run browser. Every view is a URL (path + query), drawn from the JSON API by one module per view.
import {fail, nav} from "./dom.js";
import {viewCompare} from "./compare.js";
import {viewLineage} from "./lineage.js";
import {viewRun} from "./overview.js";
import {viewPopulation} from "./population.js";
import {viewRuns} from "./runs.js";
import {viewSolution} from "./solution.js";

const VIEWS = {"/": viewRuns, "/run": viewRun, "/lineage": viewLineage, "/solution": viewSolution, "/population": viewPopulation,
  "/compare": viewCompare};
nav();
(VIEWS[location.pathname] || viewRuns)().then(() => document.body.setAttribute("data-ready", "1"))
  .catch(e => { fail(e); document.body.setAttribute("data-ready", "error"); });
