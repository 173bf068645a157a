"""A small retrieval benchmark written for privkit: titled text chunks and questions with known gold chunks.

Ten topics with 24 short chunks each (240 chunks) and five questions per topic (50 questions). Each question is
answered by one to three *gold* chunks of its topic; the other 23–21 chunks of the topic are distractors on the
same subject (other lighthouses of the same coast, other releases of the same library, other sieges of the same
castle), so a retriever has to tell close neighbours apart rather than just find the topic. Several topics are
about invented places, firms and projects (the Kessel coast, the Orvale tramway, Haldane & Pryce, Brackwater
Marshes, quillmap, Dunmore Rovers, Castle Varn), so no fact can be looked up elsewhere; the others (bread, the
solar system, household chemistry) restate common knowledge in new words.

Every chunk, title and question was written for this project; none is taken from any dataset. privkit uses the
benchmark for the retrieval stage of ScoreShield's DP-RAG study (``docs/scoreshield.md`` §6), embedding each chunk
as ``"title: text"`` (the paper embeds chunks with their page title) with the offline sentence encoder of
:mod:`privkit.data.text`.

Chunk order.  :func:`rag_benchmark` returns the chunks in one fixed, public permutation (seed
:data:`CHUNK_ORDER_SEED`), not topic by topic. A retrieval rule that breaks ties by index (as ScoreShield's does)
then favours no topic: under heavy noise many released scores clip to exactly +1 and the lowest indices win the
ties, which in topic order would hand one topic's questions their gold chunks by luck.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Chunk", "RagQuery", "RagBenchmark", "CHUNKS", "QUERIES", "CHUNK_ORDER_SEED", "rag_benchmark"]

#: Seed of the fixed permutation in which :func:`rag_benchmark` returns the chunks.
CHUNK_ORDER_SEED = 20240611


@dataclass(frozen=True)
class Chunk:
    """One retrievable chunk: a stable id (``"light-02"``), a title and its text."""

    id: str
    title: str
    text: str

    def embedding_text(self) -> str:
        """The string that is embedded: ``"title: text"``."""
        return f"{self.title}: {self.text}"


@dataclass(frozen=True)
class RagQuery:
    """A question, its topic and the ids of the chunks that answer it (its gold chunks)."""

    topic: str
    question: str
    gold: tuple[str, ...]


def _topic(prefix: str, items: tuple[tuple[str, str], ...]) -> tuple[Chunk, ...]:
    return tuple(Chunk(f"{prefix}-{i + 1:02d}", title, text) for i, (title, text) in enumerate(items))


#: topic name -> its chunks (24 per topic).
CHUNKS: dict[str, tuple[Chunk, ...]] = {
    "lighthouses": _topic("light", (
        ("Marren Head Light", "Marren Head Light stands on a granite bluff at the northern end of the Kessel coast. "
         "Its tower, finished in 1868, is 31 metres tall and painted in red and white bands."),
        ("Marren Head Light, electric lamp", "In 1921 Marren Head became the first lighthouse on the Kessel coast to "
         "replace its paraffin lamp with an electric one, powered by a diesel generator in the keeper's yard."),
        ("Gull Point Light", "Gull Point Light is a squat stone tower only 14 metres high, built in 1852 to mark the "
         "shoals at the mouth of the Serrin estuary."),
        ("Gull Point Light, automation", "The last resident keeper left Gull Point in 1978, when the light was "
         "automated and fitted with a solar-charged battery bank."),
        ("Skerry Rock Light", "Skerry Rock Light stands on a tidal reef three kilometres offshore. Stone was shipped "
         "out at low tide, and the tower took eleven summers to finish, from 1871 to 1882."),
        ("Skerry Rock Light, keepers", "Keepers at Skerry Rock served four weeks on and two weeks off, because storms "
         "could cut the reef off from the mainland for days at a time."),
        ("Tomas Reyle", "The engineer Tomas Reyle designed both Skerry Rock Light and the Ostby Beacon. He used "
         "interlocking dovetailed granite blocks so that the waves could not pull the courses of stone apart."),
        ("Ostby Beacon", "The Ostby Beacon is an unlit daymark: a white stone cone that guides fishing boats into "
         "Ostby harbour by day."),
        ("Kessel coast fog signals", "Before radio beacons, Marren Head and Skerry Rock sounded compressed-air "
         "foghorns, while Gull Point relied on a bell struck by hand."),
        ("Lantern rooms", "A lighthouse lantern room holds the lens and the lamp. On the Kessel coast most lanterns "
         "have copper domes that have weathered to green."),
        ("Marren Head Light, lens", "Marren Head carries a first-order Fresnel lens of 1,024 glass prisms that floats "
         "on a bath of mercury, so it turns with very little friction."),
        ("Light characteristics", "Each light flashes its own pattern so that sailors can tell them apart at night: "
         "Marren Head gives two white flashes every ten seconds, Gull Point shows a steady red light."),
        ("Skerry Rock Light, range", "Skerry Rock shows a single white flash every five seconds and can be seen from "
         "23 nautical miles away in clear weather."),
        ("Harlow Sands Light", "Harlow Sands Light was moved 90 metres inland in 2004 because the dunes beneath it "
         "were eroding by almost a metre a year."),
        ("Harlow Sands museum", "The former keeper's cottage at Harlow Sands now houses a small museum of shipwreck "
         "finds, open at weekends from April to October."),
        ("Wreck of the Alda", "The cargo steamer Alda struck the Skerry reef in 1869 with the loss of nineteen crew. "
         "The disaster persuaded the harbour board to pay for a lighthouse on the reef."),
        ("Kessel Harbour Board", "The Kessel Harbour Board paid for the coast's lights out of dues charged on every "
         "ship entering Ostby and Serrin."),
        ("Elin Varga", "Elin Varga kept Gull Point Light for 31 years after her husband died, one of the few women "
         "ever to hold the post on the coast."),
        ("Fennick Light", "Fennick Light was switched off in 1995 once satellite navigation had made it redundant; "
         "the tower is now let as a holiday home."),
        ("Paraffin lamps", "Paraffin vapour burners gave a brighter flame than the older oil wick lamps, but keepers "
         "had to pump up the pressure tank every few hours through the night."),
        ("Marren Head radio beacon", "A radio beacon was installed at Marren Head in 1936, letting ships with "
         "direction finders take a bearing in fog."),
        ("Marren Head restoration", "Volunteers repainted the Marren Head tower in 2019, stripping six layers of old "
         "lead paint before applying fresh red and white bands."),
        ("Visiting Skerry Rock", "Skerry Rock can be visited only on guided boat trips in calm summer weather; landing "
         "on the reef is forbidden during the seal pupping season."),
        ("Kessel coast geology", "The Kessel coast alternates between hard granite headlands and soft sandy bays, "
         "which is why its lighthouses stand on rock while its harbours lie in the bays."),
    )),
    "tramway": _topic("tram", (
        ("Orvale tramway history", "Orvale's first horse-drawn tram ran in 1879, between the river docks and "
         "Cathedral Square."),
        ("Orvale tramway electrification", "The Orvale tramway was electrified in 1898, and the last horse trams were "
         "retired within two years."),
        ("Line 1", "Line 1 runs north to south from Kelby Park to the Southern Docks, calling at Cathedral Square and "
         "the central station."),
        ("Line 4", "Line 4 is the city's only circular route; it loops around the old town walls in both directions "
         "every eight minutes."),
        ("Line 7", "Line 7, opened in 2011, links the central station with Orvale airport in 26 minutes."),
        ("The 1962 closures", "In 1962 the council closed half of the tram network and replaced it with diesel buses, "
         "a decision it reversed thirty years later."),
        ("The 1994 revival", "Trams returned to Orvale's streets in 1994 with a new low-floor line following the old "
         "route of Line 1."),
        ("Harbour Road depot", "All trams are maintained at the Harbour Road depot, which has room for 64 vehicles and "
         "its own wheel-turning lathe."),
        ("Tram fleet", "The current fleet is 58 five-section low-floor trams, each 33 metres long and carrying up to "
         "220 passengers."),
        ("Heritage tram", "A restored 1926 open-platform tram, car number 12, runs on Line 4 on summer Sundays."),
        ("Tram fares", "A single tram ticket costs the same as a bus ticket and is valid for 90 minutes, transfers "
         "included."),
        ("Ticket validation", "Paper tickets must be stamped in the orange machines on board; inspectors fine anyone "
         "travelling without a stamped ticket."),
        ("Night trams", "On Friday and Saturday nights Lines 1 and 3 run every twenty minutes until 3 a.m."),
        ("Line 3", "Line 3 climbs Vesper Hill to the university campus. With a 9 percent gradient it is the steepest "
         "adhesion tram line in the country."),
        ("Vesper Hill in winter", "To stop the wheels slipping on the hill in icy weather, the trams drop dry sand "
         "onto the rails from hoppers mounted above the wheels."),
        ("Power supply", "The overhead wire carries 750 volts direct current, fed from eleven substations spaced "
         "along the routes."),
        ("Cathedral Square", "Through Cathedral Square the trams run on batteries, so that no overhead wires spoil "
         "the view of the cathedral front."),
        ("Arden Bridge", "The Arden Bridge carries Lines 1 and 5 across the river; it was widened in 2003 to give the "
         "trams lanes of their own."),
        ("Line 5 extension", "Line 5 was extended east to the new hospital in 2018, adding four stops and 3.2 "
         "kilometres of track."),
        ("Passenger numbers", "The tram network carried 61 million passengers in 2019, more than the city's buses for "
         "the first time."),
        ("Tram priority signals", "At most junctions trams trigger their own traffic lights, so they seldom wait "
         "behind cars."),
        ("Step-free stops", "Every stop has a raised platform level with the tram floor, so wheelchairs and prams can "
         "roll straight on."),
        ("Track gauge", "Orvale's trams run on standard-gauge track, 1,435 millimetres, so they can share rails with "
         "freight trains in the docks."),
        ("Bicycles on trams", "Bicycles are allowed on trams outside the morning and evening rush hours, in the marked "
         "area by the second door."),
    )),
    "bread": _topic("bread", (
        ("Yeast", "Baker's yeast feeds on sugars in the flour and gives off carbon dioxide, which the gluten traps, "
         "so the dough rises."),
        ("Gluten", "Gluten forms when the wheat proteins glutenin and gliadin are wetted and kneaded into long, "
         "elastic strands."),
        ("Sourdough starter", "A sourdough starter is a culture of wild yeasts and lactic acid bacteria kept alive by "
         "regular feeds of flour and water."),
        ("Sourdough flavour", "Sourdough's sour taste comes from lactic and acetic acid made by the bacteria; a colder, "
         "longer fermentation gives more of the sharp acetic tang."),
        ("Dough hydration", "Hydration is the weight of water divided by the weight of flour: a ciabatta dough may be "
         "80 percent, a bagel dough nearer 55."),
        ("Autolyse", "In an autolyse, flour and water are mixed and left to rest before the salt and yeast go in, "
         "which lets gluten form with less kneading."),
        ("Salt in bread", "Salt tightens the gluten and slows fermentation; bread made without it rises fast and "
         "tastes flat."),
        ("Final proof", "The final proof is the last rise after shaping. An over-proofed loaf collapses in the oven "
         "and ends up with large, ragged holes."),
        ("The poke test", "To judge the proof, press the dough gently with a floured finger: if the dent springs back "
         "slowly, the loaf is ready for the oven."),
        ("Oven spring", "Oven spring is the quick rise in the first minutes of baking, as trapped gas expands and the "
         "yeast has a last burst of activity."),
        ("Steam in the oven", "Steam keeps the crust soft early in the bake, so the loaf can expand fully before the "
         "crust sets."),
        ("Scoring", "Slashing the top of a loaf with a blade controls where it bursts open as it expands in the oven."),
        ("Crust colour", "A brown crust comes from the Maillard reaction between sugars and amino acids, which speeds "
         "up above about 150 degrees Celsius."),
        ("Rye bread", "Rye flour forms little gluten, so rye breads depend on sticky pentosans and acidity for their "
         "structure and are usually dense."),
        ("Wholemeal bread", "Wholemeal flour keeps the bran and germ; sharp bran particles cut the gluten strands, "
         "which is why wholemeal loaves rise less."),
        ("Enriched dough", "Enriched doughs such as brioche contain butter, eggs and sugar, which soften the crumb "
         "but slow the yeast down."),
        ("Why bread goes stale", "Bread goes stale mainly because its starch recrystallises, not because it dries "
         "out, and this happens fastest at refrigerator temperatures."),
        ("Reviving a stale loaf", "A stale loaf can be revived for a few hours by sprinkling it with water and "
         "warming it in a hot oven."),
        ("Soda bread", "Soda bread rises on the carbon dioxide released when baking soda reacts with the acid in "
         "buttermilk, with no yeast at all."),
        ("Bread flour", "Bread flour has 12 to 14 percent protein, more than cake flour, so it builds a stronger "
         "gluten network."),
        ("Kneading", "Kneading stretches and aligns the gluten; the windowpane test checks whether a small piece of "
         "dough can be stretched thin enough to let light through."),
        ("Cold retarding", "Leaving shaped loaves in the fridge overnight slows the yeast more than the bacteria, "
         "which deepens the flavour."),
        ("Baking temperature", "Most lean loaves bake at 220 to 250 degrees Celsius; the crumb is done when it reaches "
         "about 96 degrees."),
        ("Pita bread", "Pita puffs up because the very hot oven turns the water in the thin dough to steam, which "
         "pushes the top and bottom layers apart."),
    )),
    "instrument makers": _topic("maker", (
        ("Haldane & Pryce", "Haldane & Pryce was founded in 1831 in the town of Wexmoor by the clockmaker Arthur "
         "Haldane and the glass grinder Miriam Pryce."),
        ("Haldane & Pryce, first products", "The firm's first products were brass barometers and ship's chronometers, "
         "sold to merchants in the port of Ostby."),
        ("Haldane & Pryce telescopes", "In 1850 Haldane & Pryce opened a telescope workshop, and its 4-inch refractor "
         "became a favourite of amateur astronomers."),
        ("Miriam Pryce's lenses", "Miriam Pryce found a way of polishing achromatic lenses that reduced colour "
         "fringes, and patented it in 1844."),
        ("The 1862 exhibition", "At the Wexmoor Industrial Exhibition of 1862 the firm won a gold medal for a "
         "surveying theodolite with a silver scale."),
        ("Calder Street factory", "Growing orders forced the company to move in 1871 from its cramped shop to a "
         "four-storey factory on Calder Street."),
        ("Haldane & Pryce microscopes", "From the 1880s the company built microscopes for hospitals, with an "
         "oil-immersion objective designed by Harold Pryce, Miriam's son."),
        ("War production", "During the war years the factory made rangefinders and binoculars, employing more than "
         "900 workers, most of them women."),
        ("The 1958 merger", "In 1958 Haldane & Pryce merged with the optics firm Corvin Brothers to form Haldane "
         "Corvin Optical."),
        ("The Starling lens", "Haldane Corvin's Starling lens of 1964 was a fast 50 mm camera lens praised for its "
         "sharpness at full aperture."),
        ("Haldane Corvin in the 1970s", "Competition from cheaper imported cameras pushed Haldane Corvin into losses "
         "through the 1970s."),
        ("End of Calder Street", "The Calder Street factory closed in 1983, and the Haldane Corvin name was sold to a "
         "company making spectacle frames."),
        ("Wexmoor Museum collection", "The Wexmoor Museum holds more than 300 Haldane & Pryce instruments, among them "
         "the theodolite that won the 1862 gold medal."),
        ("Chronometer trial", "A Haldane chronometer lost only 1.2 seconds over a 40-day sea trial in 1847, winning "
         "the firm a navy contract."),
        ("Apprentices", "Apprentices at Haldane & Pryce trained for seven years, spending the first two grinding brass "
         "and glass by hand."),
        ("The 1890 catalogue", "The 1890 catalogue listed 412 instruments, from pocket compasses to observatory "
         "telescopes that cost more than a house."),
        ("Haldane barometer", "The Haldane stick barometer held a mercury column in a walnut case, with a vernier "
         "scale for reading pressure to a hundredth of an inch."),
        ("Kelby Hill refractor", "The firm's largest telescope, a 15-inch refractor built in 1889 for the Kelby Hill "
         "Observatory, is still used there on public viewing nights."),
        ("Arthur Haldane", "Arthur Haldane died in 1866, and Miriam Pryce ran the firm on her own for the next twenty "
         "years."),
        ("The 1912 strike", "A strike over piece rates shut the Calder Street factory for six weeks in 1912."),
        ("Microscope patent case", "In 1875 the firm lost a patent dispute with a rival over an adjustable microscope "
         "stage."),
        ("Exports", "By 1900 more than half of the company's output went abroad, mostly surveying instruments for "
         "railway builders."),
        ("The heron trademark", "Instruments were engraved with a small heron, the company's trademark from 1840 "
         "until the merger."),
        ("Theodolite conservation", "Conservators cleaned the medal-winning theodolite in 2015 and found Miriam "
         "Pryce's initials scratched inside its telescope tube."),
    )),
    "marshes": _topic("marsh", (
        ("Brackwater Marshes", "Brackwater Marshes is a 1,400-hectare reserve of reedbeds, salt meadows and tidal "
         "creeks on the Serrin estuary."),
        ("Bitterns at Brackwater", "Bitterns came back to Brackwater in 2009 after an absence of forty years; the "
         "males are counted each spring by their booming calls."),
        ("The 2023 bittern survey", "The 2023 survey recorded fourteen booming males on the reserve, the highest "
         "number on record."),
        ("Avocets", "Avocets nest on the shallow lagoons behind the sea wall; wardens lower the water in April to "
         "expose the nesting islands."),
        ("Marsh harriers", "Marsh harriers glide low over the reeds looking for frogs and young birds; three pairs "
         "nested on the reserve last year."),
        ("Winter geese", "Up to 12,000 pink-footed geese roost on the estuary mudflats in winter, flying inland at "
         "dawn to feed on sugar beet tops."),
        ("Starling roost", "On November evenings huge flocks of starlings swirl over the reedbed before dropping in "
         "to roost."),
        ("Reedbed cutting", "Parts of the reedbed are cut on a seven-year rotation so that the reeds do not dry out "
         "and turn into scrub."),
        ("Water voles", "Water voles were reintroduced in 2014, and trapping mink along the ditches keeps them from "
         "being wiped out again."),
        ("Hides", "The reserve has six hides; the Lagoon Hide looks out over the avocet islands and is wheelchair "
         "accessible."),
        ("Opening hours", "The visitor centre opens daily from 9 a.m. to 5 p.m., but the trails and hides are open "
         "from dawn to dusk."),
        ("The 2016 sea wall breach", "In 2016 the sea wall was breached on purpose to let the tide flood 80 hectares "
         "of former farmland and create new salt marsh."),
        ("Salt marsh plants", "Glasswort, sea lavender and sea purslane grow on the new salt marsh, each tolerating a "
         "different amount of flooding."),
        ("Dragonflies", "Twenty-two species of dragonfly and damselfly have been recorded in the reserve's freshwater "
         "ditches."),
        ("Bearded tits", "Bearded tits live in the reedbed all year, eating insects in summer and switching to reed "
         "seeds in winter."),
        ("Cuckoos", "Cuckoos lay their eggs in reed warbler nests at Brackwater; one tagged cuckoo was tracked to the "
         "Congo and back."),
        ("Spoonbills", "Spoonbills bred at Brackwater for the first time in 2021, when two pairs raised five young in "
         "a colony of little egrets."),
        ("Otters", "Otters are seen most often at dawn from the Creek Hide, hunting eels in the main channel."),
        ("Tollesby flood defence", "The new salt marsh also protects the village of Tollesby by soaking up the energy "
         "of storm surges."),
        ("Volunteers", "About 150 volunteers help the wardens, from counting birds to mending boardwalks."),
        ("High-tide wader roost", "At high spring tides thousands of knot and dunlin crowd onto the shingle spit, the "
         "only dry ground left."),
        ("Bird ringing", "Ringers catch reed warblers in mist nets each summer; one ringed bird was caught again nine "
         "years later."),
        ("Dogs on the reserve", "Dogs are not allowed on the reserve trails, apart from assistance dogs, so that "
         "ground-nesting birds are not disturbed."),
        ("Barn owls", "Barn owls hunt over the rough grassland at dusk and nest in boxes fixed to the old farm "
         "buildings."),
    )),
    "solar system": _topic("sol", (
        ("Mercury", "Mercury is the smallest planet and the closest to the Sun. It has almost no atmosphere, so its "
         "surface swings from about 430 degrees Celsius by day to minus 180 at night."),
        ("Venus", "Venus has a thick carbon dioxide atmosphere whose greenhouse effect makes it the hottest planet, "
         "hotter even than Mercury."),
        ("Venus rotation", "Venus spins backwards compared with most planets, and so slowly that one day there lasts "
         "longer than its year."),
        ("Origin of the Moon", "The Moon probably formed from debris thrown out when a body the size of Mars "
         "collided with the young Earth."),
        ("Olympus Mons", "Mars has the tallest volcano in the solar system, Olympus Mons, about 22 kilometres high."),
        ("Water on Mars", "Dry river valleys and layered sediments show that liquid water once flowed on Mars; today "
         "most of its water is frozen in the polar caps."),
        ("Asteroid belt", "The asteroid belt lies between Mars and Jupiter; its largest object, Ceres, is classed as "
         "a dwarf planet."),
        ("Jupiter", "Jupiter is more massive than all the other planets together, and its Great Red Spot is a storm "
         "wider than the Earth."),
        ("Europa", "Jupiter's moon Europa has an icy crust over a salty ocean, which makes it a target in the search "
         "for life."),
        ("Io", "Io, another moon of Jupiter, is the most volcanically active body known, heated by tidal squeezing "
         "from Jupiter."),
        ("Saturn's rings", "Saturn's rings are made mostly of water ice, from dust grains to boulders, and are less "
         "than a kilometre thick in most places."),
        ("Titan", "Titan, Saturn's largest moon, has a thick nitrogen atmosphere and lakes of liquid methane and "
         "ethane."),
        ("Enceladus", "Geysers at the south pole of Enceladus spray water vapour and ice into space from an ocean "
         "beneath its surface."),
        ("Uranus", "Uranus is tipped on its side, with an axial tilt of about 98 degrees, so each pole gets decades "
         "of continuous daylight followed by decades of darkness."),
        ("Neptune", "Neptune has the fastest winds measured on any planet, more than 2,000 kilometres per hour."),
        ("Pluto", "Pluto was reclassified as a dwarf planet in 2006 because it has not cleared its orbit of other "
         "objects."),
        ("Kuiper belt", "The Kuiper belt beyond Neptune holds icy bodies left over from the formation of the solar "
         "system, Pluto among them."),
        ("Oort cloud", "Long-period comets are thought to come from the Oort cloud, a distant shell of icy bodies far "
         "beyond the Kuiper belt."),
        ("The Sun", "The Sun holds about 99.8 percent of the solar system's mass and shines by fusing hydrogen into "
         "helium in its core."),
        ("Solar wind", "The solar wind is a stream of charged particles from the Sun; where it meets the Earth's "
         "magnetic field near the poles it lights up the sky as auroras."),
        ("Comet tails", "A comet grows a tail when sunlight heats its ice, and the tail always points away from the "
         "Sun, pushed by the solar wind and by light itself."),
        ("Phases of the Moon", "The Moon's phases change as we see different parts of its sunlit half during its "
         "29.5-day cycle."),
        ("Tides", "Ocean tides are raised mainly by the Moon's gravity, and the Sun adds spring tides when the two "
         "line up."),
        ("Moons of Mars", "Mars has two small, lumpy moons, Phobos and Deimos, which may be captured asteroids."),
    )),
    "quillmap": _topic("quill", (
        ("quillmap", "quillmap is an open-source Python library for drawing interactive maps from GeoJSON files, "
         "first released in 2016."),
        ("quillmap 1.0", "quillmap 1.0 came out in March 2017 and introduced the Layer class, still the centre of "
         "the API."),
        ("quillmap 2.0", "Version 2.0 dropped support for Python 2 and renamed the render() method to draw(), "
         "breaking many older scripts."),
        ("quillmap 2.3", "quillmap 2.3 added vector tiles, which made large country maps load about five times "
         "faster than GeoJSON alone."),
        ("quillmap 3.0", "Version 3.0, released in 2022, replaced the old JavaScript front end with a WebGL "
         "renderer."),
        ("Map projections", "quillmap reprojects data on the fly with the pyproj library; Web Mercator is the "
         "default projection."),
        ("Installing quillmap", "Install quillmap with pip; the optional extras quillmap[tiles] and quillmap[export] "
         "pull in the tile server and the PDF exporter."),
        ("Licence", "quillmap is distributed under the BSD 3-clause licence."),
        ("Maintainers", "Ines Okafor started quillmap while drawing flood maps; a team of six volunteers maintains "
         "it today."),
        ("Governance", "Decisions about quillmap are taken by lazy consensus on the issue tracker; the steering "
         "council votes only when consensus fails."),
        ("The 2020 security flaw", "A 2020 security flaw let a crafted GeoJSON file run JavaScript in the map viewer; "
         "it was fixed in version 2.5.1."),
        ("Memory use", "Loading a GeoJSON file reads the whole file into memory; for files over a gigabyte the "
         "documentation recommends converting them to vector tiles first."),
        ("Choropleth maps", "The choropleth() helper colours regions by a numeric column, with quantile or "
         "equal-interval classes."),
        ("Exporting maps", "Maps can be exported to PNG, SVG or PDF; PDF export needs the optional cairo "
         "dependency."),
        ("Testing", "The test suite compares rendered maps with stored reference images and fails when more than 0.1 "
         "percent of the pixels differ."),
        ("Deprecation policy", "A feature stays deprecated, with a warning, for at least two minor releases before "
         "it is removed."),
        ("Plugins", "Third-party plugins register new layer types through an entry point called quillmap.layers."),
        ("Jupyter", "In a Jupyter notebook a Map object shows itself as an interactive widget without a call to "
         "show()."),
        ("Coordinate order", "quillmap expects coordinates in longitude, latitude order, as GeoJSON does; swapping "
         "them is the most frequently reported bug."),
        ("Offline tiles", "Base map tiles are fetched from the internet by default, but an offline tile cache can be "
         "configured."),
        ("quillmap 3.0.2", "Version 3.0.2 fixed a performance regression that made maps with many markers redraw "
         "slowly when zooming."),
        ("Accessibility grant", "In 2021 the project received a grant for accessibility work, which added keyboard "
         "navigation and screen-reader labels."),
        ("Type hints", "Since version 2.8 the whole public API carries type hints, checked with mypy in continuous "
         "integration."),
        ("Supported Python versions", "quillmap 3.x requires Python 3.9 or newer."),
    )),
    "football club": _topic("club", (
        ("Dunmore Rovers", "Dunmore Rovers were founded in 1889 by workers at the Dunmore ironworks and played their "
         "first games on a cinder pitch beside the furnaces."),
        ("Club colours", "The club plays in amber and black, colours said to come from the glow of the furnaces at "
         "night."),
        ("Foundry Lane", "Since 1911 Rovers have played at Foundry Lane, a ground that held 28,000 before seats were "
         "installed."),
        ("Foundry Lane today", "Since its conversion to an all-seater stadium in 1996, Foundry Lane holds 14,200 "
         "spectators."),
        ("The 1934 cup", "Rovers won the national cup for the only time in 1934, beating Castleford United 2–1 after "
         "a replay."),
        ("Wattie Burns", "The club's record scorer is Walter 'Wattie' Burns, with 214 league goals between 1927 and "
         "1939."),
        ("Relegation of 1972", "A run of eleven games without a win sent Rovers down to the third tier in 1972."),
        ("Promotions of 1984 and 1985", "Under manager Jean Abara, Rovers won promotion in two seasons running, in "
         "1984 and 1985."),
        ("Jean Abara", "Jean Abara managed Rovers for nine seasons and was known for a high pressing game that was "
         "unusual at the time."),
        ("Administration", "In 2003 Rovers went into administration with debts of four million and were docked ten "
         "points."),
        ("Supporters' trust", "A supporters' trust bought a controlling stake in the club in 2005, and the fans still "
         "elect two directors."),
        ("Local rivalry", "Rovers' fiercest rivals are Halvern Town; locals call the match the Slag Heap Derby."),
        ("Record attendance", "The record crowd at Foundry Lane was 27,604, for a cup quarter-final against Halvern "
         "Town in 1948."),
        ("Dunmore Rovers Women", "Dunmore Rovers Women were founded in 1971 and reached the top division for the "
         "first time in 2020."),
        ("Youth academy", "The youth academy trains about 120 players aged eight to eighteen on a site next to the "
         "old ironworks."),
        ("Sami Lindqvist", "The winger Sami Lindqvist came through the academy and was sold in 2014 for a club-record "
         "fee of 3.5 million."),
        ("Shirt sponsors", "For thirty years the shirt sponsor was a local brewery; since 2019 the club has carried a "
         "hospital charity on its shirts."),
        ("Floodlights", "Foundry Lane's floodlights, first switched on in 1956, were among the first in the league."),
        ("Mascot", "The club mascot is Sparky, a fire-breathing dragon, in a nod to the ironworks."),
        ("Nickname", "Rovers are nicknamed the Ironmen, after the trade of the men who founded the club."),
        ("Stands", "The main stand is named after Wattie Burns, and the away fans stand in the Furnace End."),
        ("The 2019 play-off", "Rovers lost the 2019 play-off final on penalties after a 1–1 draw."),
        ("Tom Ashby", "The goalkeeper Tom Ashby played 602 games for Rovers, the club record for appearances."),
        ("Stadium move", "Plans to leave Foundry Lane for an out-of-town stadium were dropped in 2012 after fans "
         "opposed them."),
    )),
    "castle": _topic("castle", (
        ("Castle Varn", "Castle Varn stands on a crag above the River Lode, guarding the only ford for twenty miles."),
        ("The first castle", "The first castle at Varn was a timber tower on an earth mound, raised around 1090."),
        ("The stone keep", "Lord Edric of Varn replaced the timber tower with a square stone keep between 1160 and "
         "1175."),
        ("Curtain wall", "A curtain wall with six round towers was added in the 1230s, enclosing an inner ward of "
         "about one hectare."),
        ("The siege of 1216", "In the siege of 1216 the garrison held out for seven weeks, until the attackers "
         "undermined the south-west tower."),
        ("Undermining", "The miners dug a tunnel under the tower, propped it with timber and then burned the props, "
         "and the corner of the tower came crashing down."),
        ("The rebuilt tower", "The fallen tower was rebuilt round rather than square, because a round tower resists "
         "mining and has no corners to weaken."),
        ("The siege of 1644", "During the civil war of 1644 Castle Varn was besieged for five months by "
         "parliamentary forces before its garrison surrendered."),
        ("Cannon damage", "Cannon firing from Gallows Hill in 1644 breached the gatehouse; the marks of the shot can "
         "still be seen in the stonework."),
        ("Slighting", "After the surrender of 1644 Parliament ordered the castle slighted: the keep was blown up so "
         "that it could never be held again."),
        ("Lady Margery", "Lady Margery of Varn commanded the defence in 1644 after her husband was captured, and "
         "negotiated terms that spared the garrison."),
        ("Great hall", "The great hall, built around 1300, had a hammerbeam roof that was sold for timber after the "
         "slighting."),
        ("Chapel", "The castle chapel survives almost intact, with painted ceiling panels of saints from the "
         "fifteenth century."),
        ("Well", "The castle well is 52 metres deep, cut through solid rock to reach water below the level of the "
         "river."),
        ("The 'dungeon'", "Despite local legend, the so-called dungeon under the north tower was probably a store "
         "for grain and salted meat."),
        ("Gatehouse", "The twin-towered gatehouse had two portcullises and murder holes through which defenders "
         "could drop stones."),
        ("Market charter", "The town below the castle received a market charter in 1204, and its weekly market "
         "still runs on Thursdays."),
        ("A romantic ruin", "By the 1800s the ruined castle had become a favourite subject for painters and a stop "
         "for tourists on the Lode valley tour."),
        ("State care", "Castle Varn was taken into state care in 1921, and the ivy covering the walls was stripped "
         "off to stop it damaging the mortar."),
        ("Excavation", "Excavations in 1987 found the post holes of the original timber tower beneath the inner "
         "ward."),
        ("Lord Edric", "Lord Edric of Varn, the builder of the stone keep, also founded the priory across the river "
         "and was buried there in 1181."),
        ("Lode Priory", "Lode Priory, founded by the lords of Varn, was dissolved in 1538, and its stones were "
         "reused in local farmhouses."),
        ("Visiting Castle Varn", "The castle is open to visitors all year except Christmas Day; the wall walk closes "
         "in high winds."),
        ("Drawbridge", "A drawbridge once crossed a rock-cut ditch in front of the gatehouse; a stone causeway "
         "replaced it in the eighteenth century."),
    )),
    "household chemistry": _topic("chem", (
        ("Vinegar and limescale", "Vinegar dissolves limescale because its acetic acid reacts with calcium "
         "carbonate, releasing carbon dioxide."),
        ("Bleach and ammonia", "Never mix bleach with ammonia-based cleaners: the reaction releases toxic chloramine "
         "gases."),
        ("Bleach and acids", "Mixing bleach with acidic cleaners such as vinegar releases chlorine gas, which damages "
         "the lungs."),
        ("Baking soda", "Baking soda is sodium bicarbonate, a mild alkali that neutralises acidic smells and scours "
         "gently without scratching."),
        ("How soap works", "A soap molecule has a water-loving head and a fat-loving tail, so soap surrounds grease "
         "and lets water carry it away."),
        ("Hard water and soap", "Hard water contains calcium and magnesium ions that react with soap to form scum "
         "instead of lather."),
        ("Rust", "Iron rusts when it reacts with oxygen and water; salt speeds the reaction up, which is why cars "
         "rust faster near the sea."),
        ("Removing rust stains", "Citric or oxalic acid removes rust stains by dissolving the iron oxide into "
         "soluble compounds."),
        ("Tarnished silver", "Silver tarnishes black because it reacts with sulphur compounds in the air, forming "
         "silver sulphide."),
        ("The foil method", "Tarnish can be reversed by laying silver on aluminium foil in hot water with baking "
         "soda: the aluminium takes the sulphur back from the silver."),
        ("Biological detergents", "Biological detergents contain enzymes such as protease and amylase that break "
         "down protein and starch stains at low temperatures."),
        ("Hydrogen peroxide", "Hydrogen peroxide bleaches stains by giving off oxygen; it breaks down into water and "
         "oxygen in light, which is why it is sold in dark bottles."),
        ("Oil fires", "Never throw water on burning cooking oil; smother it with a fire blanket or a wet-chemical "
         "extinguisher instead."),
        ("Drain cleaners", "Caustic drain cleaners contain sodium hydroxide, which turns fats into soap and "
         "dissolves hair, but also burns skin."),
        ("Onions and tears", "Cutting an onion releases a sulphur compound that forms a mild acid when it reaches "
         "the moisture in your eyes."),
        ("Browning apples", "Cut apples turn brown as an enzyme oxidises their phenols; lemon juice slows this by "
         "lowering the pH."),
        ("Salt on icy paths", "Salt melts ice on paths because salty water freezes at a lower temperature than pure "
         "water."),
        ("Rinse aid", "Rinse aid lowers the surface tension of water, so it runs off glasses in sheets instead of "
         "drying into spots."),
        ("Furred-up kettles", "Limescale builds up in kettles in hard-water areas, as dissolved calcium bicarbonate "
         "turns into calcium carbonate when the water is heated."),
        ("Carbon monoxide", "A gas boiler burning with too little air makes carbon monoxide, an odourless gas, which "
         "is why homes need detectors."),
        ("White rings on wood", "White rings on a wooden table are moisture trapped in the finish; gentle heat from "
         "a hairdryer can drive it out."),
        ("Activated charcoal", "Activated charcoal absorbs odours because its huge internal surface traps smell "
         "molecules."),
        ("Oxygen bleach", "Oxygen bleach powders release hydrogen peroxide in water and are gentler on coloured "
         "fabrics than chlorine bleach."),
        ("Acidic and alkaline cleaners", "Acidic cleaners remove mineral deposits, while alkaline cleaners are "
         "better at lifting grease and protein stains."),
    )),
}

#: The 50 questions with their gold chunk ids (1–3 each, all from the question's own topic).
QUERIES: tuple[RagQuery, ...] = (
    RagQuery("lighthouses", "Which lighthouse on the Kessel coast was the first to use electric light, and when?",
             ("light-02",)),
    RagQuery("lighthouses", "Who designed the lighthouse on the offshore reef, and how long did it take to build?",
             ("light-07", "light-05")),
    RagQuery("lighthouses", "What shipwreck led to a lighthouse being built on the Skerry reef?", ("light-16",)),
    RagQuery("lighthouses", "Why was Harlow Sands Light moved away from the sea?", ("light-14",)),
    RagQuery("lighthouses", "When did Gull Point lose its keepers, and who looked after the light longest?",
             ("light-04", "light-18")),
    RagQuery("tramway", "Which tram line goes to the airport and how long does the ride take?", ("tram-05",)),
    RagQuery("tramway", "How do the trams get up the steep hill to the university when the rails are icy?",
             ("tram-14", "tram-15")),
    RagQuery("tramway", "Why are there no overhead wires in front of the cathedral?", ("tram-17",)),
    RagQuery("tramway", "When were Orvale's trams cut back in favour of buses, and when did they return?",
             ("tram-06", "tram-07")),
    RagQuery("tramway", "What voltage powers the trams and how many substations feed it?", ("tram-16",)),
    RagQuery("bread", "Why does sourdough taste sour, and how can a baker make it tangier?",
             ("bread-04", "bread-22")),
    RagQuery("bread", "Why does bread go stale faster when I keep it in the fridge?", ("bread-17",)),
    RagQuery("bread", "How can I tell when my shaped dough has risen enough to bake?", ("bread-09",)),
    RagQuery("bread", "What makes a pocket form inside pita bread?", ("bread-24",)),
    RagQuery("bread", "Why do rye and wholemeal loaves turn out denser than white bread?", ("bread-14", "bread-15")),
    RagQuery("instrument makers", "Who founded Haldane & Pryce, and what were their trades?", ("maker-01",)),
    RagQuery("instrument makers", "Who ran the instrument firm after its co-founder died in 1866?", ("maker-19",)),
    RagQuery("instrument makers", "Which of the firm's telescopes is still in use, and where can the public look "
             "through it?", ("maker-18",)),
    RagQuery("instrument makers", "What became of the company in 1958, and when did its factory close?",
             ("maker-09", "maker-12")),
    RagQuery("instrument makers", "What did the firm win a gold medal for in 1862, and where is that instrument "
             "now?", ("maker-05", "maker-13")),
    RagQuery("marshes", "When did bitterns return to Brackwater, and how many were heard in the latest count?",
             ("marsh-02", "marsh-03")),
    RagQuery("marshes", "Why was the sea wall on the estuary reserve deliberately broken?",
             ("marsh-12", "marsh-19")),
    RagQuery("marshes", "Where can I watch nesting avocets from a hide?", ("marsh-10", "marsh-04")),
    RagQuery("marshes", "Which bird bred on the reserve for the first time in 2021?", ("marsh-17",)),
    RagQuery("marshes", "When and where am I most likely to see otters on the reserve?", ("marsh-18",)),
    RagQuery("solar system", "Which planet is the hottest, and why?", ("sol-02",)),
    RagQuery("solar system", "Which moons of the giant planets may hide oceans of liquid water?",
             ("sol-09", "sol-13")),
    RagQuery("solar system", "Why does Uranus have such extreme seasons?", ("sol-14",)),
    RagQuery("solar system", "Why is Pluto no longer counted as a planet?", ("sol-16",)),
    RagQuery("solar system", "What causes the northern and southern lights?", ("sol-20",)),
    RagQuery("quillmap", "Which quillmap release renamed render(), and what support did it drop?", ("quill-03",)),
    RagQuery("quillmap", "Which version fixed the bug that let a GeoJSON file run scripts in the viewer?",
             ("quill-11",)),
    RagQuery("quillmap", "How can I make quillmap load a very large country map faster?", ("quill-04", "quill-12")),
    RagQuery("quillmap", "What do I need to install to save quillmap maps as PDF files?", ("quill-07", "quill-14")),
    RagQuery("quillmap", "My points appear in the wrong place on the map when I pass latitude first. Why?",
             ("quill-19",)),
    RagQuery("football club", "Which Dunmore Rovers players hold the club records for goals and for appearances?",
             ("club-06", "club-23")),
    RagQuery("football club", "When did Rovers win the national cup, and who did they beat?", ("club-05",)),
    RagQuery("football club", "Why do the Ironmen play in amber and black?", ("club-02",)),
    RagQuery("football club", "What is the largest crowd ever at Foundry Lane, and who were the opponents?",
             ("club-13",)),
    RagQuery("football club", "How did the fans come to own the club after its money troubles?",
             ("club-10", "club-11")),
    RagQuery("castle", "How did the attackers bring down a tower of Castle Varn in 1216, and how was it rebuilt?",
             ("castle-05", "castle-06", "castle-07")),
    RagQuery("castle", "Who led the defence of the castle during the 1644 siege?", ("castle-11",)),
    RagQuery("castle", "Why is the keep of Castle Varn a ruin today?", ("castle-10",)),
    RagQuery("castle", "Who built the stone keep, and where is he buried?", ("castle-03", "castle-21")),
    RagQuery("castle", "How deep is the well at Castle Varn?", ("castle-14",)),
    RagQuery("household chemistry", "Which cleaning products are dangerous to mix, and what gas does each mixture "
             "give off?", ("chem-02", "chem-03")),
    RagQuery("household chemistry", "How can I clean tarnished silver without polishing it?", ("chem-10", "chem-09")),
    RagQuery("household chemistry", "Why does my kettle get furred up, and how can I remove the deposit?",
             ("chem-19", "chem-01")),
    RagQuery("household chemistry", "What should I do if a pan of oil catches fire?", ("chem-13",)),
    RagQuery("household chemistry", "Why does salt help clear icy paths?", ("chem-17",)),
)


@dataclass(frozen=True)
class RagBenchmark:
    """The benchmark as indices: what a retrieval study needs.

    Attributes:
        chunks: the chunks in retrieval-index order (a fixed public permutation, see the module docstring).
        chunk_topics: the topic of each chunk, same order.
        queries: the questions.
        gold: one tuple of chunk *indices* (into ``chunks``) per question.
    """

    chunks: tuple[Chunk, ...]
    chunk_topics: tuple[str, ...]
    queries: tuple[RagQuery, ...]
    gold: tuple[tuple[int, ...], ...]

    def chunk_texts(self) -> list[str]:
        """The strings to embed, one per chunk (``"title: text"``)."""
        return [c.embedding_text() for c in self.chunks]

    def questions(self) -> list[str]:
        """The question strings, one per query."""
        return [q.question for q in self.queries]


def rag_benchmark() -> RagBenchmark:
    """The chunks in their fixed retrieval order, the questions and the gold chunk indices."""
    flat = [(topic, c) for topic, chunks in CHUNKS.items() for c in chunks]
    order = np.random.default_rng(CHUNK_ORDER_SEED).permutation(len(flat))
    chunks = tuple(flat[i][1] for i in order)
    topics = tuple(flat[i][0] for i in order)
    index = {c.id: i for i, c in enumerate(chunks)}
    gold = tuple(tuple(index[g] for g in q.gold) for q in QUERIES)
    return RagBenchmark(chunks=chunks, chunk_topics=topics, queries=QUERIES, gold=gold)
